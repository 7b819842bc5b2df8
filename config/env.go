package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EnvName returns the environment variable that overrides the key at the
// dotted path, e.g. "kafka.producer.batch_size" ->
// "STREAMER_KAFKA_PRODUCER_BATCH_SIZE".
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// EnvVars returns, in the order of the reference in the package doc, the
// environment variables that override keys, each mapped to its dotted key
// path. Keys under models have none.
func EnvVars() []EnvVar {
	out := make([]EnvVar, len(leaves))
	for i, l := range leaves {
		out[i] = EnvVar{Name: EnvName(l.path), Key: l.path}
	}
	return out
}

// EnvVar pairs an environment variable with the key it overrides.
type EnvVar struct {
	Name string // e.g. STREAMER_KAFKA_GROUP
	Key  string // e.g. kafka.group
}

var leafByEnv = func() map[string]leaf {
	m := make(map[string]leaf, len(leaves))
	for _, l := range leaves {
		m[EnvName(l.path)] = l
	}
	return m
}()

// env applies every STREAMER_* entry of env to c. Later entries win.
func (d *decoder) env(c *Config, env []string) {
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfig {
			continue
		}
		l, ok := leafByEnv[name]
		if !ok {
			d.errs = append(d.errs, &Error{Env: name, kind: errUnknownEnv,
				Msg: fmt.Sprintf("it overrides no key (%s is reserved for the config file path; see the package doc for the list)", EnvConfig)})
			continue
		}
		if err := setFromEnv(l.ptr(c), val); err != nil {
			d.errs = append(d.errs, &Error{Key: l.path, Env: name, Msg: err.Error()})
			continue
		}
		// The variable now owns the key (and the items of a list).
		for p := range d.src {
			if strings.HasPrefix(p, l.path+"[") {
				delete(d.src, p)
			}
		}
		d.src[l.path] = source{env: name}
	}
}

func setFromEnv(p any, val string) error {
	switch p := p.(type) {
	case *string:
		*p = val
	case *Secret:
		*p = Secret(val)
	case *bool:
		x, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", val)
		}
		*p = x
	case *int:
		x, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q is not an integer", val)
		}
		*p = x
	case *float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", val)
		}
		*p = x
	case *time.Duration:
		x, err := parseDuration(val)
		if err != nil {
			return err
		}
		*p = x
	case *[]string:
		// Comma-separated; blanks around items are dropped. An empty
		// value gives an empty list, which validation rejects.
		var items []string
		if strings.TrimSpace(val) != "" {
			for _, s := range strings.Split(val, ",") {
				items = append(items, strings.TrimSpace(s))
			}
		}
		*p = items
	default:
		panic("config: unsupported leaf type")
	}
	return nil
}
