package wire

import "strconv"

// Logged decisions. A Decoder WithLogged also reads a ranking request's
// "logged": {"item": …, "propensity": p}: the item another run of the
// service put first for this request and the probability with which its
// exploration policy did (the response topic's first item and its
// propensity). A replay of a log (streamer eval --log) then shows that item
// first with that propensity instead of drawing its own, so that the
// off-policy estimates are those of the logged decisions. The live
// service's decoders do not read it: over POST /v1/rank it is an unknown
// field, on the input topic it is skipped like any member the contract
// does not name.

// WithLogged returns a copy of d that reads a ranking request's "logged"
// member into Event.Logged and Event.LoggedProp.
func (d *Decoder) WithLogged() *Decoder {
	c := *d
	c.logged = true
	return &c
}

// loggedField is "logged" as a field of d: a request's, when d reads it.
func (s *scanner) loggedField() field {
	if s.d.logged && s.d.maxCands > 0 {
		return fieldLogged
	}
	return fieldUnknown
}

// loggedDecision parses the "logged" object: item, a string, and
// propensity, a number in (0, 1].
func (s *scanner) loggedDecision() *Error {
	ev := s.ev
	if c := s.src[s.pos]; c != '{' {
		return &Error{Reason: ReasonWrongType, Detail: "logged: got " + kindOf(c) + ", want object"}
	}
	s.pos++
	haveItem, haveProp := false, false
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
	} else {
		for {
			s.skipWS()
			if s.pos >= len(s.src) || s.src[s.pos] != '"' {
				return s.syntax("want object key")
			}
			mark := len(ev.buf)
			key, e := s.key()
			if e != nil {
				return e
			}
			name := string(key)
			ev.buf = ev.buf[:mark]
			s.skipWS()
			if s.pos >= len(s.src) || s.src[s.pos] != ':' {
				return s.syntax("want ':' after object key")
			}
			s.pos++
			s.skipWS()
			if s.pos >= len(s.src) {
				return s.syntax("want value")
			}
			switch name {
			case "item":
				ev.Logged, haveItem, e = s.stringValue("logged.item")
			case "propensity":
				e = s.propensity()
				haveProp = e == nil
			default:
				return &Error{Reason: ReasonBadRequest, Detail: "unknown field " + strconv.Quote("logged."+name) + " (logged has item and propensity)"}
			}
			if e != nil {
				return e
			}
			done, e := s.separator('}')
			if e != nil {
				return e
			}
			if done {
				break
			}
		}
	}
	if !haveItem || !haveProp {
		return &Error{Reason: ReasonBadRequest, Detail: "logged: want item and propensity"}
	}
	ev.HasLogged = true
	return nil
}

// propensity parses logged.propensity: a number in (0, 1].
func (s *scanner) propensity() *Error {
	c := s.src[s.pos]
	v, st := s.number()
	switch st {
	case numOK:
		if !(v > 0 && v <= 1) {
			return &Error{Reason: ReasonBadRequest, Detail: "logged.propensity: " + strconv.FormatFloat(v, 'g', -1, 64) + " is not in (0, 1]"}
		}
		s.ev.LoggedProp = v
		return nil
	case numNonFinite:
		return &Error{Reason: ReasonNonFinite, Detail: "logged.propensity: not finite"}
	case numWrongType:
		return &Error{Reason: ReasonWrongType, Detail: "logged.propensity: got " + kindOf(c) + ", want number"}
	}
	return s.syntax("invalid number")
}

// LoggedIndex is the index of the candidate a request's logged decision
// names (Event.Logged), or -1 when it has none or names no candidate.
func (ev *Event) LoggedIndex() int {
	if !ev.HasLogged {
		return -1
	}
	for i := range ev.Cands {
		if string(ev.Cands[i].Item) == string(ev.Logged) {
			return i
		}
	}
	return -1
}
