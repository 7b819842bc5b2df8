package stream

// keys is the key table of a key-scoped model with one stripe (partition
// scope, or max_keys under 2048), for the tests that look into it.
func (m *shardModel) keys() *keyedModels {
	h := m.h.(*keyedHolder)
	if len(h.stripes) != 1 {
		panic("keys: a key table in stripes")
	}
	return h.stripes[0].k
}
