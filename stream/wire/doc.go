// Package wire is the wire contract of the streamer (README.md, "Wire contract"): it decodes
// and validates input events and encodes output score records. Both run once
// per event on the hot path and do not allocate in steady state; the package
// uses only the standard library and knows nothing about Kafka or models.
//
// # Input
//
// Each message value on the input topic is one JSON object:
//
//	{"id": "e-1", "key": "user-42", "ts": "2026-11-22T04:00:00Z",
//	 "features": [0.12, 3.4, …], "label": 1}
//
// Its fields:
//
//   - features (required): a dense array of exactly dim numbers, or, when the
//     Decoder is configured with feature names, an object {"name": value, …}
//     that must give every configured name and no other (a repeated name: the
//     last wins).
//   - label (optional): a finite number, true (1) or false (0); absent or null
//     means unlabelled, i.e. score only. Whether the label suits a model is the
//     model's business (see ReasonBadLabel).
//   - id, key, ts (optional): strings, or null for absent. They are unescaped
//     and kept as bytes; ts is not parsed. key is informational: the Kafka
//     message key is authoritative.
//   - Other fields are ignored, whatever their value.
//
// Numbers are parsed exactly as strconv.ParseFloat parses them. A value is
// accepted only if it is syntactically valid JSON (RFC 8259) with an object at
// the top level and nothing after it; invalid UTF-8 inside strings is
// tolerated and kept as is.
//
// # Output
//
// One message per (event, model), keyed like the input, written by
// AppendScore with exactly these fields in this order:
//
//	{"id":"e-1","key":"user-42","model":"clicks","version":17,"score":0.42,"prediction":1,
//	 "certainty":{"mistake_bound":0.31,"delta":0.05,"n":120000},
//	 "event_ts":"2026-11-22T04:00:00Z","scored_at":"2026-11-22T04:00:00.123456789Z"}
//
// prediction is the class, or the level for ordinal models. Without a bound,
// mistake_bound and delta are null; n is always present. event_ts is the
// input's ts and is omitted when the input had none. scored_at is UTC, RFC 3339
// with up to nanosecond precision. Floats are written in their shortest form,
// the text strconv.FormatFloat(v, 'g', -1, 64) gives (by ftoa.go's own
// Schubfach, tested against strconv); a non-finite score or bound is written
// as null.
//
// # Dead-letter reasons
//
// A rejected event goes to the dead-letter topic unchanged, with its Reason as
// a header and as a metric label. The values are stable:
//
//	reason            meaning
//	too_large         the value is longer than the configured maximum
//	not_json          not a syntactically valid JSON object: truncated, a top-level
//	                  array or scalar, a NaN literal, trailing data after the object…
//	wrong_type        a known field has the wrong JSON type: features not an array or
//	                  object (or an object without configured names), a feature not
//	                  a number, id/key/ts not a string, label a string/array/object
//	missing_features  no features field, features null, or configured names absent
//	wrong_dimension   a features array whose length is not dim, or an unknown name
//	non_finite        a feature or the label overflows to ±Inf (e.g. 1e999)
//	bad_label         the label is well-formed but a model rejects it (set by callers)
//
// not_json wins over every other reason; otherwise the first defect in the
// input is reported, and a missing features field last. The Error's Detail
// says where, e.g. "features[3]: not a number (got string)" or
// "got 31 features, want 32".
//
// # Files
//
// Decoding: Decoder.Decode and the document's own fields (decode.go); the
// features (features.go: an array, a matrix, named; hashed in hash.go,
// their entities in entity.go); ranking requests (request.go, hashed
// candidates in hashreq.go, logged decisions in logged.go); all of them on
// the scanner's primitives (scanner.go: whitespace, keys, strings,
// literals, skipping a value, errors) and the number parser (number.go).
// Encoding: score records and ranking responses (encode.go; AppendRanking
// in request.go), floats in their shortest form (ftoa.go), memoised by a
// FloatCache (floatcache.go). Calls between the files go one way: none
// calls into a file that calls it.
//
// # Buffers and concurrency
//
// A Decoder is immutable and safe for concurrent use. An Event is reused
// across Decode calls by one goroutine: its ID, Key and TS are valid until the
// next Decode into it, and its Features are overwritten in place. AppendScore
// appends to a caller-supplied buffer.
package wire
