package main

import (
	"strings"

	"swerl/internal/jsonscan"
)

// fastRewardWire decodes the common shape of a reward JSONL line in one
// pass: an object whose known fields have their plain types (strings, an
// object of strings, an array of strings) and whose other fields are any
// JSON. It gives up (ok false) on everything else, and the caller decodes
// with encoding/json, which then also words the error: null values, keys
// that only match a field case-insensitively, duplicate fields, escapes
// naming lone surrogates, invalid UTF-8, deep nesting. Where it says ok,
// the result is what json.Unmarshal into rewardWire gives.
func fastRewardWire(b []byte) (w rewardWire, ok bool) {
	var seen [7]bool
	ok = jsonscan.Try(b, func(p *jsonscan.Scanner) bool {
		return p.Object(true, func(key string) bool {
			field := -1
			for i, name := range rewardWireFields {
				if key == name {
					field = i
				} else if strings.EqualFold(key, name) {
					return false
				}
			}
			if field >= 0 {
				if seen[field] {
					return false
				}
				seen[field] = true
			}
			switch field {
			case 0, 3, 6: // id, output, mode
				s, sok := p.Str()
				if !sok {
					return false
				}
				switch field {
				case 0:
					w.ID = s
				case 3:
					w.Output = &s
				default:
					w.Mode = s
				}
			case 1, 2: // code_context, oracle_new_content
				m, mok := p.StrMap()
				if !mok {
					return false
				}
				if field == 1 {
					w.CodeContext = m
				} else {
					w.OracleNewContent = m
				}
			case 4, 5: // oracle_patches, pred_patches
				l, lok := p.StrList()
				if !lok {
					return false
				}
				if field == 4 {
					w.OraclePatches = &l
				} else {
					w.PredPatches = &l
				}
			default:
				return p.Skip(0)
			}
			return true
		})
	})
	return w, ok
}

// rewardWireFields are rewardWire's JSON names, in fastRewardWire's order.
var rewardWireFields = [7]string{"id", "code_context", "oracle_new_content", "output", "oracle_patches", "pred_patches", "mode"}
