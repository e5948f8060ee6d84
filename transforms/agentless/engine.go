package agentless

import "sync"

// memoEngine remembers an engine's answers by source text: the samples of
// one instance share their original files, and often their patched ones.
type memoEngine struct {
	eng     Engine
	parses  memo[bool]
	unparse memo[string]
	strip   memo[string]
	funcs   memo[map[string]string]
}

// memo is one method's answers by source text, errors included. The lock
// is not held while the engine works, so two callers may compute the same
// answer once each; the engine is deterministic, so either is kept.
type memo[T any] struct {
	mu sync.Mutex
	m  map[string]memoAnswer[T]
}

type memoAnswer[T any] struct {
	v   T
	err error
}

func (m *memo[T]) get(code string, compute func(string) (T, error)) (T, error) {
	m.mu.Lock()
	a, ok := m.m[code]
	m.mu.Unlock()
	if !ok {
		a.v, a.err = compute(code)
		m.mu.Lock()
		if m.m == nil {
			m.m = map[string]memoAnswer[T]{}
		}
		m.m[code] = a
		m.mu.Unlock()
	}
	return a.v, a.err
}

// Memoize wraps eng with a cache keyed by source text; safe for
// concurrent use. The cache lives as long as the returned engine.
func Memoize(eng Engine) Engine { return &memoEngine{eng: eng} }

func (m *memoEngine) Parses(code string) bool {
	v, _ := m.parses.get(code, func(c string) (bool, error) { return m.eng.Parses(c), nil })
	return v
}

func (m *memoEngine) Unparse(code string) (string, error) {
	return m.unparse.get(code, m.eng.Unparse)
}

func (m *memoEngine) RemoveCommentsAndDocstrings(code string) (string, error) {
	return m.strip.get(code, m.eng.RemoveCommentsAndDocstrings)
}

func (m *memoEngine) Functions(code string) (map[string]string, error) {
	return m.funcs.get(code, m.eng.Functions)
}
