package stream

// Pipeline hands the publisher a callback that lives in a file of its own.
type Pipeline struct {
	pub *Publisher
	c   counter
}

func New() *Pipeline { return &Pipeline{pub: &Publisher{}} }

func (p *Pipeline) Run() {
	go p.pub.loop()
	p.consume()
}

func (p *Pipeline) consume() { p.pub.send(p.c.done) }
