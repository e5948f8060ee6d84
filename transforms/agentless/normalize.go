package agentless

import "errors"

// ErrNormalizeRaises is returned where Agentless Mini's normalize_patch
// raises (a text that is not Python 3); a checker writes null.
var ErrNormalizeRaises = errors.New("agentless: normalize_patch raises")

// ErrNormalizeUnsupported is returned until the normalizer exists.
var ErrNormalizeUnsupported = errors.New("agentless: normalize_patch is not implemented yet")

// NormalizePatch is utils/data.py normalize_patch.
func NormalizePatch(patch string, files, newFiles map[string]string, edited []string) (string, error) {
	return "", ErrNormalizeUnsupported
}
