package main

import "swerl/internal/jsonscan"

// fastRewardWire decodes the common shape of a reward JSONL line in one
// pass: an object whose known fields have their plain types (strings, an
// object of strings, an array of strings) or null, and whose other fields
// are any JSON. It gives up (ok false) on everything else, and the caller
// decodes with encoding/json, which then also words the error: keys that
// only match a field case-insensitively, duplicate fields, escapes naming
// lone surrogates, invalid UTF-8, deep nesting. Where it says ok, the
// result is what json.Unmarshal into rewardWire gives.
func fastRewardWire(b []byte) (w rewardWire, ok bool) {
	ok = jsonscan.Try(b, func(p *jsonscan.Scanner) bool {
		return p.Fields(rewardWireFields[:], func(field int) bool {
			switch field {
			case 0, 3, 6: // id, output, mode
				s, ok := p.Str()
				switch field {
				case 0:
					w.ID = s
				case 3:
					w.Output = &s
				default:
					w.Mode = s
				}
				return ok
			case 1, 2: // code_context, oracle_new_content
				m, ok := p.StrMap()
				if field == 1 {
					w.CodeContext = m
				} else {
					w.OracleNewContent = m
				}
				return ok
			default: // 4, 5: oracle_patches, pred_patches
				l, ok := p.StrList()
				if field == 4 {
					w.OraclePatches = &l
				} else {
					w.PredPatches = &l
				}
				return ok
			}
		})
	})
	return w, ok
}

// rewardWireFields are rewardWire's JSON names, in fastRewardWire's order.
var rewardWireFields = [7]string{"id", "code_context", "oracle_new_content", "output", "oracle_patches", "pred_patches", "mode"}
