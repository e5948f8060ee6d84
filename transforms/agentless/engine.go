package agentless

import "sync"

// memoEngine remembers an engine's answers by source text: the samples of
// one instance share their original files, and often their patched ones.
type memoEngine struct {
	eng     Engine
	mu      sync.Mutex
	parses  map[string]bool
	unparse map[string]memoResult
	strip   map[string]memoResult
	funcs   map[string]memoFuncs
}

type memoResult struct {
	s   string
	err error
}

type memoFuncs struct {
	m   map[string]string
	err error
}

// Memoize wraps eng with a cache keyed by source text; safe for
// concurrent use. The cache lives as long as the returned engine.
func Memoize(eng Engine) Engine {
	return &memoEngine{eng: eng, parses: map[string]bool{}, unparse: map[string]memoResult{},
		strip: map[string]memoResult{}, funcs: map[string]memoFuncs{}}
}

func (m *memoEngine) Parses(code string) bool {
	m.mu.Lock()
	v, ok := m.parses[code]
	m.mu.Unlock()
	if !ok {
		v = m.eng.Parses(code)
		m.mu.Lock()
		m.parses[code] = v
		m.mu.Unlock()
	}
	return v
}

func (m *memoEngine) Unparse(code string) (string, error) {
	m.mu.Lock()
	v, ok := m.unparse[code]
	m.mu.Unlock()
	if !ok {
		v.s, v.err = m.eng.Unparse(code)
		m.mu.Lock()
		m.unparse[code] = v
		m.mu.Unlock()
	}
	return v.s, v.err
}

func (m *memoEngine) RemoveCommentsAndDocstrings(code string) (string, error) {
	m.mu.Lock()
	v, ok := m.strip[code]
	m.mu.Unlock()
	if !ok {
		v.s, v.err = m.eng.RemoveCommentsAndDocstrings(code)
		m.mu.Lock()
		m.strip[code] = v
		m.mu.Unlock()
	}
	return v.s, v.err
}

func (m *memoEngine) Functions(code string) (map[string]string, error) {
	m.mu.Lock()
	v, ok := m.funcs[code]
	m.mu.Unlock()
	if !ok {
		v.m, v.err = m.eng.Functions(code)
		m.mu.Lock()
		m.funcs[code] = v
		m.mu.Unlock()
	}
	return v.m, v.err
}
