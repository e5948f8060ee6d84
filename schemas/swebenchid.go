package schemas

import "strings"

// SWEBenchID returns the id SWE-bench's harness knows an instance by: a
// mined PR's "owner/repo#N" becomes "owner__repo-N" (psf/requests#863 →
// psf__requests-863), the form of SWE-bench's instance_id; an id already
// in that form (an imported SWE-bench row keeps its instance_id) and every
// other id (a plain commit's "owner/repo@sha12", a hunk task's) is
// returned unchanged. Mined instances keep their ids; predictions use
// this mapping.
func SWEBenchID(id string) string {
	repo, num, ok := strings.Cut(id, "#")
	owner, name, ok2 := strings.Cut(repo, "/")
	if !ok || !ok2 || owner == "" || name == "" || strings.ContainsAny(name, "/ \t\n") || strings.ContainsAny(owner, " \t\n") || num == "" {
		return id
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return id
		}
	}
	return owner + "__" + name + "-" + num
}
