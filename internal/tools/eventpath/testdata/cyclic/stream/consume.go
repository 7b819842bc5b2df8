package stream

// Pipeline hands the publisher a callback of its own file's.
type Pipeline struct {
	pub  *Publisher
	sent int
}

func New() *Pipeline { return &Pipeline{pub: &Publisher{}} }

func (p *Pipeline) Run() {
	go p.pub.loop()
	p.consume()
}

func (p *Pipeline) consume() { p.pub.send(p.done) }

func (p *Pipeline) done() { p.sent++ }
