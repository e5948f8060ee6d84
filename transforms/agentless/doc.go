// Package agentless is Agentless Mini (facebookresearch/swe-rl,
// src/swerl/agentless_mini), the scaffold SWE-RL's paper evaluates with:
// the repair step's post-processing of a model answer (SEARCH/REPLACE edits
// applied to the localized files, syntax and blank-line checks, the patch as
// `git diff` prints it), the normalization of candidate patches and the
// majority vote that picks one.
//
// Conformance is defined by the vectors in testdata (see its README): every
// expected field must be reproduced byte for byte. Check runs such lines.
package agentless
