package agentless

import "errors"

// ErrNormalizeUnsupported is returned until the normalizer exists.
var ErrNormalizeUnsupported = errors.New("agentless: normalize_patch is not implemented yet")

// NormalizePatch is utils/data.py normalize_patch.
func NormalizePatch(patch string, files, newFiles map[string]string, edited []string) (string, error) {
	return "", ErrNormalizeUnsupported
}
