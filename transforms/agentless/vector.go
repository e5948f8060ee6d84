package agentless

// Vector is one conformance line's input fields (the expected fields and
// notes are ignored here; tests read them separately).
type Vector struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// apply and normalize
	Files map[string]string `json:"files"`
	// apply: the model's answer
	Edits *string `json:"edits"`
	// normalize
	NewFiles    map[string]string `json:"new_files"`
	EditedFiles []string          `json:"edited_files"`
	Patch       *string           `json:"patch"`
	// vote
	CandidatesNormalized []string `json:"candidates_normalized"`
}
