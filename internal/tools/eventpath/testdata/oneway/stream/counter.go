package stream

type counter struct{ sent int }

func (c *counter) done() { c.sent++ }
