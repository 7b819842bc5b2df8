// Package config is the service configuration of streamer: a plain
// [Config] struct, its defaults ([Default]), a YAML loader with environment
// overrides ([Load], [Parse]) and explicit validation ([Config.Validate]).
// The model types a models entry may name, and their own keys, come from
// the [github.com/streamer/streamer/online.Registry] passed to each of
// these (cmd/streamer assembles the service's); every key of a models
// entry besides the common ones is decoded into its type's parameter
// struct ([Model.Params]), starting from the type's defaults.
//
// Loading starts from the defaults, replaces each key present in the file,
// applies the STREAMER_* environment overrides, then validates. Any problem
// stops start-up with an [*Error] that names the key by its full dotted path
// with list indices, and its line or environment variable:
//
//	config: unknown key "models[0].kernel.gama" (line 12) (models[0].kernel takes: type, gamma, features, seed, degree, coef0, orthogonal, sparse)
//	config: models[0].balance: does not apply to model type svm (it takes: name, type, features, scope, max_keys, label, fallback, residual, kernel, C, …) (line 14)
//	config: models[0].kernel.gamma: must be > 0 and finite, got -1 (line 13)
//	config: kafka.commit_interval: "5 seconds" is not a duration (write e.g. 1s, 250ms, 1m30s) (line 9)
//	config: kafka.start_offset: "middle" is not one of earliest, latest (from STREAMER_KAFKA_START_OFFSET)
//	config: models: at least one model is required
//
// # Rules
//
//   - Unknown keys are errors, at every level, and so are repeated keys.
//   - A key that is absent, or present with an empty value (key: or key: ~),
//     keeps its default.
//   - Durations are Go duration strings: "250ms", "5s", "1m30s".
//   - Integers must be YAML integers (not quoted), booleans true or false.
//   - The file holds a single YAML document. Anchors and aliases work;
//     merge keys (<<) are not supported and are reported as unknown keys.
//
// # Keys
//
// Each key with its default and meaning. configs/streamer.yaml in the
// repository is the same reference as a commented file.
//
//	shutdown_timeout                25s               how long a stop may take (final checkpoint, deliveries); past it exit 1; 1s to 1h
//	kafka.brokers                   [localhost:9092]  bootstrap brokers; non-empty list of host:port (port required)
//	kafka.group                     streamer          consumer group id; required
//	kafka.input_topic               events            topic of the input events
//	kafka.output_topic              scores            topic the scores are published to
//	kafka.dlq_topic                 events.dlq        dead-letter topic for rejected events
//	                                                  (the three topics must be valid Kafka topic names and differ)
//	kafka.client_id                 streamer          client id sent to the brokers; required
//	kafka.start_offset              earliest          where a group with no committed offset starts: earliest | latest
//	kafka.max_message_bytes         1048576           input values larger than this are dead-lettered (too_large); > 0
//	kafka.max_feature_abs           1e15              events with a feature beyond ±this are dead-lettered (out_of_range); 0 < x ≤ 1e100
//	kafka.unready_after             15s               how long the brokers may be unreachable, or publishing may
//	                                                  keep failing, before /readyz turns 503 (≥ 1s)
//	kafka.commit_interval           1s                how often processed offsets are checkpointed (their scores
//	                                                  acknowledged, offsets committed) when snapshots are off; > 0
//	kafka.session_timeout           10s               consumer-group session timeout: how long the group waits for
//	                                                  a member that stopped heartbeating (e.g. was killed); >= 1s
//	kafka.producer.batch_size       1000              most messages per produce batch; > 0
//	kafka.producer.batch_timeout    5ms               longest a partial batch waits; > 0
//	kafka.producer.required_acks    all               acknowledgements a produce waits for: none | one | all
//	kafka.producer.buffer_bytes     134217728         most bytes (keys and values) of records published and not yet
//	                                                  acknowledged; past it consumption waits for the brokers; > 0
//	kafka.tls.enabled               false             TLS on every broker connection (consumer, producers, changelog)
//	kafka.tls.ca_file               ""                PEM file of the CAs that sign the brokers' certificates ("" = system roots)
//	kafka.tls.cert_file             ""                client certificate (PEM) for mutual TLS; needs key_file
//	kafka.tls.key_file              ""                its private key (PEM); needs cert_file
//	kafka.tls.server_name           ""                name the brokers' certificates must carry ("" = the host of each address)
//	kafka.tls.insecure_skip_verify  false             accept any broker certificate (testing only; not with ca_file)
//	                                                  (the tls keys other than enabled need enabled: true; files must be readable)
//	kafka.sasl.mechanism            ""                SASL authentication: "" (off) | plain | scram-sha-256 | scram-sha-512
//	kafka.sasl.username             ""                required with a mechanism
//	kafka.sasl.password             ""                the password; better from STREAMER_KAFKA_SASL_PASSWORD or password_file.
//	                                                  Never logged or printed: it shows as [redacted]
//	kafka.sasl.password_file        ""                file holding the password (one trailing newline dropped); not with password
//	http.listen                     127.0.0.1:9464    address of /v1/rank, /metrics, /healthz, /readyz; host:port, empty host = all interfaces
//	http.read_timeout               10s               longest time to read a request, headers included; > 0
//	http.write_timeout              30s               longest time to write a response; > 0 (a /debug/pprof/profile
//	                                                  must ask for fewer seconds than this)
//	http.idle_timeout               2m                keep-alive connections idle longer are closed; > 0
//	http.pprof                      false             serve the net/http/pprof handlers under /debug/pprof/ (404 when false)
//	http.tls.cert_file              ""                HTTPS on http.listen: the certificate (PEM, leaf first) served; needs
//	                                                  key_file; "" = plain HTTP. TLS 1.2 or later
//	http.tls.key_file               ""                its private key (PEM); must match the certificate
//	http.tls.client_ca_file         ""                mutual TLS: every connection must present a client certificate one
//	                                                  of these CAs (PEM) signed; needs cert_file
//	                                                  (the tls files are read again when they change and on SIGHUP: a bad
//	                                                  new file keeps the old one, logged and counted)
//	http.auth.tokens_file           ""                bearer tokens, one a line (# comments), each ≥ 16 characters; requests
//	                                                  to the protect groups need "Authorization: Bearer <token>" (else 401);
//	                                                  read again when it changes and on SIGHUP; "" = no authentication
//	http.auth.protect               [rank, pprof,     groups that need a token (with tokens_file): rank (/v1/*), metrics,
//	                                 admin]           pprof (/debug/pprof/*), health (/healthz, /readyz), admin
//	                                                  (/v1/models*: model versions and rollback; a rollback is refused
//	                                                  unless admin is protected or http.listen is loopback)
//	log.level                       info              debug | info | warn | error
//	log.format                      text              text | json
//	metrics.accuracy_window         1000              events in the sliding prequential-accuracy window; > 0
//	labels.join_window.events       0                 delayed labels: most unlabelled events (impressions) kept waiting
//	                                                  for a label-only event with their id (0 = no count limit)
//	labels.join_window.time         0s                delayed labels: longest an impression waits (0 = no time limit);
//	                                                  both 0 = delayed labels off
//	labels.join_window.per_key      0                 most impressions of one message key kept; more are not kept
//	                                                  (dropped, reason quota), so that one key cannot push the
//	                                                  others' out (0 = no limit)
//	snapshot.dir                    ""                directory of snapshot files ("" = no file store)
//	snapshot.every                  5s                snapshot period; offsets are committed only after the
//	                                                  snapshot that includes them is durable; > 0
//	snapshot.every_events           0                 also snapshot after this many events (0 = off); >= 0
//	snapshot.keep                   3                 snapshot files kept; > 0
//	snapshot.versions               5                 versions kept of each global model in dir/versions (for
//	                                                  streamer models list|rollback); 0 = off; [0, 1000]; needs dir
//	snapshot.versions_every         10m               least time between two versions a checkpoint records of a
//	                                                  model (0 = whenever it changed); >= 0
//	snapshot.changelog_topic        ""                compacted Kafka topic holding the same state, so that a
//	                                                  stateless instance restores from Kafka alone ("" = off)
//	                                                  With neither dir nor changelog_topic, state is not durable.
//	snapshot.scope                  instance          instance: one state per instance | partition: state per
//	                                                  input partition in the changelog, for several instances
//	                                                  in one group (scale-out; needs changelog_topic)
//	snapshot.remote_refresh         1s                scope partition: how often the other instances'
//	                                                  partition statistics are read from the changelog; > 0
//	rank.model                      ""                the model that ranks the candidates of ranking requests
//	                                                  ("" = requests off); not an aggregating model
//	rank.max_candidates             1000              a request with more candidates is bad_request; [1, 100000]
//	rank.response_topic             ""                topic of the responses to requests read from Kafka
//	                                                  ("" = kafka.output_topic)
//	rank.log_topic                  ""                POST /v1/rank's exploration log: every request answered, as
//	                                                  received, keyed by its key; its response goes to
//	                                                  rank.response_topic ("" = not logged)
//	rank.partitioner                murmur2           how the input's producers map a key to a partition, for
//	                                                  POST /v1/rank's ownership check: murmur2 | fnv1a | crc32
//	                                                  (checked against the keyed events consumed: a mismatch is
//	                                                  counted, logged and said on /readyz)
//	rank.explore.policy             greedy            greedy | epsilon | ucb | thompson: how the top k are ordered;
//	                                                  ucb and thompson keep exploration statistics per key
//	                                                  ((dim+1)(dim+2)/2 floats): the rank model needs scope: key,
//	                                                  dense features, features.dim ≤ 256
//	rank.explore.epsilon            0.05              epsilon: the probability of a uniform pick at each position
//	rank.explore.alpha              1 (thompson: 0.1) ucb: score + alpha × the candidate's uncertainty width;
//	                                                  thompson: score + alpha × a posterior draw's term; ≥ 0
//	rank.explore.samples            100               thompson: draws that estimate the propensities; [1, 100000]
//	rank.explore.seed               1                 the policy's random draws (per shard)
//	rank.join.events                100000            delayed labels: most items shown by ranking requests kept waiting
//	                                                  for their label, per shard, apart from labels.join_window's
//	                                                  impressions (0 = not kept: their labels count as unknown ids)
//	rank.join.time                  0s                longest a shown item waits (0 = labels.join_window.time)
//	rank.join.per_key               10000             most shown items of one key kept; more are not kept (0 = no limit)
//	rank.join.entries               0                 hashed features: the hashed entries the shown items keep, all
//	                                                  together, 13 bytes each (0 = 64 × events); ≥ features.max_features
//	rank.join.new_keys              0.5               the share of the window the items of keys that have sent no label yet
//	                                                  may hold; once they do, one more takes the oldest's slot if that
//	                                                  is such an item, else is not kept (1 = no limit, one queue)
//	rank.challenger.model           ""                a model that ranks every request in shadow (not served); its
//	                                                  greedy policy is evaluated off-policy against rank.model's
//	                                                  from the exploration log ("" = none); same kind as rank.model,
//	                                                  not an aggregate; policy greedy or epsilon
//	rank.challenger.promote         manual            manual: report only | auto: swap the two when the lower bound
//	                                                  of (challenger − champion) stays > 0 for hold labelled first items
//	rank.challenger.estimator       dr                dr | ips: the estimator of the difference
//	rank.challenger.confidence      0.95              level of the difference's confidence sequence; [0.5, 1)
//	rank.challenger.hold            2000              labelled first items the lower bound must stay > 0 over
//	                                                  (checked every 100); [100, 10000000]
//	calibration.window              2000              each model's window of prequential (score, label) pairs its
//	                                                  calibrated certainty is fitted on (0 = off); [0, 1000000]
//	calibration.every               100               labelled pairs between refits of the calibration table; > 0
//	calibration.delta               0.1               conformal intervals (non-classifiers) have level 1 − delta; (0, 1)
//	calibration.min_interval        10ms              the least time between the starts of two refits (0 = every `every` pairs); [0s, 1h]
//	models                          (none)            list of models; at least one is required
//
// Keys every entry models[i] has, whatever its type:
//
//	name                (required)  unique, 1 to 64 characters from [a-z0-9_-]; a metric label and the
//	                                "model" field of output records
//	type                (required)  a registered model type: mam | omam | logistic | lda | svm | lsrrank |
//	                                mlsrrank | krr | lowrank | adaboost in the service
//	features.dim        (required)  input dimension; > 0 (with features.shape: rows·cols unless given)
//	features.names      (none)      optional feature names; when set, events may send features as an object
//	                                {"name": value}; exactly dim names, non-empty and unique
//	features.shape      (none)      [rows, cols]: events may send the features as rows arrays of cols numbers
//	                                (row-major; dim defaults to rows·cols)
//	features.standardize false      keep running per-feature means and variances (Welford) and standardise
//	                                inputs before the model (every model type)
//	features.hash       (off)      {bits: B, seed: S}: hashed categorical features; dim is 2^B (B in [1, 30])
//	features.namespaces (none)     hashing: the namespaces events may use (needed by interactions), at most 255;
//	                                namespace i is field i+1 of the models that read fields (fm's factorize)
//	features.interactions (none)   hashing: [[a, b], …] pairs of namespaces whose features are crossed
//	features.max_features 4096     hashing: an event with more hashed features is dead-lettered too_many_features
//	scope               global      global (one model) | key (one instance per event key, e.g. per user; created on
//	                                first sight; max_keys in memory, every key in the key store,
//	                                snapshot.dir/keystore)
//	max_keys            10000       scope key: instances kept in memory; only with scope key
//	label.positive      (none)      classifiers: the wire label's condition for class +1, an operator
//	                                (>=, >, <=, <, ==) and a finite number, quoted: ">= 4"; −1 elsewhere
//	label.edges         (none)      ordinal models: levels − 1 strictly increasing finite numbers;
//	                                level = 1 + #{edges ≤ label} (not with omam's own edges)
//	label.min, .max     (none)      any model: finite bounds of the wire labels it reads; an event
//	                                whose label is outside [min, max] is dead-lettered bad_label
//	                                before any model learns it (not in the fingerprint)
//	fallback            (none)      scope key: a global model listed before this one, of the same kind
//	                                (an ordinal model with label.edges: or a regression model that
//	                                publishes values); a key's records carry its answer, with
//	                                "fallback": its name, until the key's own instance decides
//	residual            false       with a fallback (a regression model) and a ranking or regression
//	                                model: a key's instance learns the label less the fallback's
//	                                prediction and publishes their sum
//
// Every other key of a models entry belongs to the model type: it is a
// field of the type's parameter struct (nested keys such as kernel.gamma
// are nested structs, lists such as mlsrrank's kernels are lists of them),
// with the type's defaults, some of which depend on other keys (the kernel
// type, the solver, features.dim). configs/streamer.yaml in the repository
// is the reference: it documents each type's keys, their defaults and
// limits. The type validates its keys, and its errors name the key under
// the entry (models[0].kernel.gamma) with its line.
//
// A key the model's type does not take is an error naming it and listing
// the keys the type takes: "does not apply to model type …" for a key of
// another type, an unknown key otherwise; so is a nested key its struct
// does not have.
// A key the type takes but that does not apply in the configuration given
// is an error too rather than being silently ignored: for instance gamma,
// features or seed with kernel.type linear, features or seed in the exact
// kernel mode (mam and omam with budget > 0, lsrrank and krr with solver
// exact), or window together with decay. All models must currently share
// the same features: every models[i].features.dim and
// models[i].features.names must equal those of models[0].
//
// # Environment
//
// Every key outside models is overridden by the variable STREAMER_ + its
// dotted path upper-cased with dots turned into underscores ([EnvName],
// [EnvVars]):
//
//	STREAMER_SHUTDOWN_TIMEOUT
//	STREAMER_KAFKA_BROKERS                 comma-separated list: host1:9092,host2:9092
//	STREAMER_KAFKA_GROUP
//	STREAMER_KAFKA_INPUT_TOPIC
//	STREAMER_KAFKA_OUTPUT_TOPIC
//	STREAMER_KAFKA_DLQ_TOPIC
//	STREAMER_KAFKA_CLIENT_ID
//	STREAMER_KAFKA_START_OFFSET
//	STREAMER_KAFKA_MAX_MESSAGE_BYTES
//	STREAMER_KAFKA_MAX_FEATURE_ABS
//	STREAMER_KAFKA_COMMIT_INTERVAL
//	STREAMER_KAFKA_UNREADY_AFTER
//	STREAMER_KAFKA_SESSION_TIMEOUT
//	STREAMER_KAFKA_PRODUCER_BATCH_SIZE
//	STREAMER_KAFKA_PRODUCER_BATCH_TIMEOUT
//	STREAMER_KAFKA_PRODUCER_REQUIRED_ACKS
//	STREAMER_KAFKA_PRODUCER_BUFFER_BYTES
//	STREAMER_KAFKA_TLS_ENABLED             true or false
//	STREAMER_KAFKA_TLS_CA_FILE
//	STREAMER_KAFKA_TLS_CERT_FILE
//	STREAMER_KAFKA_TLS_KEY_FILE
//	STREAMER_KAFKA_TLS_SERVER_NAME
//	STREAMER_KAFKA_TLS_INSECURE_SKIP_VERIFY
//	STREAMER_KAFKA_SASL_MECHANISM
//	STREAMER_KAFKA_SASL_USERNAME
//	STREAMER_KAFKA_SASL_PASSWORD           the way to pass the password without writing it in a file
//	STREAMER_KAFKA_SASL_PASSWORD_FILE
//	STREAMER_HTTP_LISTEN
//	STREAMER_HTTP_READ_TIMEOUT
//	STREAMER_HTTP_WRITE_TIMEOUT
//	STREAMER_HTTP_IDLE_TIMEOUT
//	STREAMER_HTTP_PPROF
//	STREAMER_HTTP_TLS_CERT_FILE
//	STREAMER_HTTP_TLS_KEY_FILE
//	STREAMER_HTTP_TLS_CLIENT_CA_FILE
//	STREAMER_HTTP_AUTH_TOKENS_FILE
//	STREAMER_HTTP_AUTH_PROTECT             comma-separated list: rank,metrics,pprof
//	STREAMER_LOG_LEVEL
//	STREAMER_LOG_FORMAT
//	STREAMER_METRICS_ACCURACY_WINDOW
//	STREAMER_LABELS_JOIN_WINDOW_EVENTS
//	STREAMER_LABELS_JOIN_WINDOW_TIME
//	STREAMER_LABELS_JOIN_WINDOW_PER_KEY
//	STREAMER_SNAPSHOT_DIR
//	STREAMER_SNAPSHOT_EVERY
//	STREAMER_SNAPSHOT_EVERY_EVENTS
//	STREAMER_SNAPSHOT_KEEP
//	STREAMER_SNAPSHOT_VERSIONS
//	STREAMER_SNAPSHOT_VERSIONS_EVERY
//	STREAMER_SNAPSHOT_CHANGELOG_TOPIC
//	STREAMER_SNAPSHOT_SCOPE
//	STREAMER_SNAPSHOT_REMOTE_REFRESH
//	STREAMER_RANK_MODEL
//	STREAMER_RANK_MAX_CANDIDATES
//	STREAMER_RANK_RESPONSE_TOPIC
//	STREAMER_RANK_LOG_TOPIC
//	STREAMER_RANK_PARTITIONER
//	STREAMER_RANK_EXPLORE_POLICY
//	STREAMER_RANK_EXPLORE_EPSILON
//	STREAMER_RANK_EXPLORE_ALPHA
//	STREAMER_RANK_EXPLORE_SAMPLES
//	STREAMER_RANK_EXPLORE_SEED
//	STREAMER_RANK_JOIN_EVENTS
//	STREAMER_RANK_JOIN_TIME
//	STREAMER_RANK_JOIN_PER_KEY
//	STREAMER_RANK_JOIN_ENTRIES
//	STREAMER_RANK_JOIN_NEW_KEYS
//	STREAMER_RANK_CHALLENGER_MODEL
//	STREAMER_RANK_CHALLENGER_PROMOTE
//	STREAMER_RANK_CHALLENGER_ESTIMATOR
//	STREAMER_RANK_CHALLENGER_CONFIDENCE
//	STREAMER_RANK_CHALLENGER_HOLD
//	STREAMER_CALIBRATION_WINDOW
//	STREAMER_CALIBRATION_EVERY
//	STREAMER_CALIBRATION_DELTA
//	STREAMER_CALIBRATION_MIN_INTERVAL
//
// A variable whose value does not parse or validate is an error naming the
// variable. A STREAMER_* variable that matches no key is an error too (typo
// protection), except STREAMER_CONFIG ([EnvConfig]), which is reserved for
// the path of the config file; [Load] itself does not read it.
//
// # Fingerprints
//
// [Config.Fingerprint] (all models, in order) and [Model.Fingerprint] (one
// model) are hex SHA-256 digests of a canonical encoding of every model
// key after defaults: name, type, features, scope, max_keys, the
// canonical encoding of the type's parameters (online/codec: by key, zero
// values left out), the label section when set and residual with its
// fallback when set (not a plain fallback, which changes no model's state). Saved model state records the fingerprint, and state
// is not restored into a model configured differently.
package config
