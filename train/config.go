package train

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Schema says which keys a config file may hold besides its struct's fields.
type Schema struct {
	// Kind names the config in messages ("TRL GRPOConfig").
	Kind string
	// NoEffect keys are accepted (so a TRL config loads) and listed by Decode: they change nothing
	// mcprl computes (logging destinations, PyTorch precision and memory switches).
	NoEffect map[string]bool
	// Unsupported keys would change the computation but mcprl does not implement them: naming one is
	// an error that says so.
	Unsupported map[string]bool
}

// NoEffect are the transformers TrainingArguments options that do not change what mcprl computes.
var NoEffect = SetOf("run_name", "disable_tqdm", "logging_strategy", "save_strategy",
	"logging_first_step", "remove_unused_columns", "fp16", "tf32",
	"dataloader_num_workers", "ddp_find_unused_parameters", "overwrite_output_dir", "use_liger_kernel",
	"torch_empty_cache_steps", "push_to_hub", "hub_model_id", "save_only_model")

// Unsupported are the transformers TrainingArguments options that mcprl does not implement.
var Unsupported = SetOf("lr_scheduler_kwargs", "optim", "eval_strategy", "eval_steps", "per_device_eval_batch_size",
	"gradient_checkpointing_kwargs", "resume_from_checkpoint")

// SetOf returns the set of keys.
func SetOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Union returns a set holding every key of the sets.
func Union(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		for k := range s {
			m[k] = true
		}
	}
	return m
}

// Config is what Decode fills: a pointer to a struct with yaml tags (inlined structs included) that
// validates itself, returning ValueErrors to have their lines named.
type Config interface {
	Validate() error
}

// ReadFile reads a YAML config file over the defaults already in cfg; see Decode.
func ReadFile(path string, cfg Config, s Schema) (ignored []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Decode(data, path, cfg, s)
}

// Decode reads YAML config data over the defaults already in cfg and validates it; a cfg with a
// Resolve method has it called between the two (derived values). name labels errors (a file name). Unknown keys and values of the wrong type are errors naming the key and its
// line ("name:LINE: key ..."), as are the ValueErrors of cfg.Validate. It returns the NoEffect keys
// the file holds, as "key (line N)".
func Decode(data []byte, name string, cfg Config, s Schema) (ignored []string, err error) {
	keys := map[int]string{} // line -> key path, to name the key in errors
	if len(bytes.TrimSpace(data)) > 0 {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, decodeError(err, name, keys)
		}
		v := reflect.ValueOf(cfg).Elem()
		if errs := checkKeys(&root, v.Type(), "", keys, name, s); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		// Decode with KnownFields into the config plus the no-effect keys (captured, then dropped).
		file := reflect.New(fileType(v.Type(), s.NoEffect))
		file.Elem().Field(0).Set(v)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(file.Interface()); err != nil {
			return nil, decodeError(err, name, keys)
		}
		v.Set(file.Elem().Field(0))
		ignored = ignoredKeys(&root, s.NoEffect)
	}
	if r, ok := cfg.(interface{ Resolve() }); ok {
		r.Resolve()
	}
	if err := cfg.Validate(); err != nil {
		// A key's line is its first; a list item (rewards[1]) whose
		// line holds its first field is found through that field.
		lines := map[string]int{}
		for line, key := range keys {
			for k := key; ; {
				if l, ok := lines[k]; !ok || line < l {
					lines[k] = line
				}
				i := strings.LastIndexByte(k, '.')
				if i < 0 {
					break
				}
				k = k[:i]
			}
		}
		var out []error
		for _, e := range unjoin(err) {
			var ve *ValueError
			if errors.As(e, &ve) {
				if l, ok := lines[ve.Key]; ok {
					ve.Line = l
					out = append(out, fmt.Errorf("%s:%d: %w", name, l, ve))
					continue
				}
			}
			out = append(out, fmt.Errorf("%s: %w", name, e))
		}
		return nil, errors.Join(out...)
	}
	return ignored, nil
}

// fileType is t inlined with one field per no-effect key, so that yaml.v3's KnownFields decoding
// accepts exactly t's keys and those.
func fileType(t reflect.Type, noEffect map[string]bool) reflect.Type {
	fields := []reflect.StructField{{Name: "Config", Type: t, Tag: `yaml:",inline"`}}
	keys := make([]string, 0, len(noEffect))
	for k := range noEffect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Ignored%d", i), Type: reflect.TypeOf(yaml.Node{}), Tag: reflect.StructTag(`yaml:"` + k + `"`),
		})
	}
	return reflect.StructOf(fields)
}

// ignoredKeys lists the top-level no-effect keys of a parsed file with their lines.
func ignoredKeys(root *yaml.Node, noEffect map[string]bool) []string {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	var out []string
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; noEffect[k.Value] {
			out = append(out, fmt.Sprintf("%s (line %d)", k.Value, k.Line))
		}
	}
	return out
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// decodeError rewrites yaml.v3's "line N: msg" errors as "name:N: key: msg".
func decodeError(err error, name string, keys map[int]string) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		if sub := lineRE.FindStringSubmatch(m); sub != nil {
			line, _ := strconv.Atoi(sub[1])
			if k, ok := keys[line]; ok && !strings.Contains(sub[2], k) {
				errs = append(errs, fmt.Errorf("%s:%d: %s: %s", name, line, k, sub[2]))
				continue
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, sub[2]))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, m))
	}
	return errors.Join(errs...)
}

// fieldKeys records the YAML key of every field of the struct type t, inlined structs' included.
func fieldKeys(t reflect.Type, known map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			fieldKeys(f.Type, known)
			continue
		}
		if key != "" && key != "-" {
			known[key] = f.Type
		}
	}
}

// checkKeys reports every mapping key the struct type t does not know, by line, with a suggestion,
// and records the key path of each value's line in keys.
func checkKeys(n *yaml.Node, t reflect.Type, path string, keys map[int]string, name string, s Schema) []error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode {
			var errs []error
			for i, item := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if _, ok := keys[item.Line]; !ok {
					keys[item.Line] = p
				}
				errs = append(errs, checkKeys(item, t.Elem(), p, keys, name, s)...)
			}
			return errs
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	known := map[string]reflect.Type{}
	fieldKeys(t, known)
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		ft, ok := known[k.Value]
		if !ok && path == "" && s.NoEffect[k.Value] {
			continue
		}
		if !ok && path == "" && s.Unsupported[k.Value] {
			errs = append(errs, fmt.Errorf("%s:%d: %q is a %s option that mcprl does not implement; remove it", name, k.Line, p, s.Kind))
			continue
		}
		if !ok {
			msg := fmt.Sprintf("%s:%d: unknown key %q", name, k.Line, p)
			if s := closest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: key %q repeated (first on line %d)", name, k.Line, p, first))
		} else {
			seen[k.Value] = k.Line
		}
		keys[v.Line] = p
		errs = append(errs, checkKeys(v, ft, p, keys, name, s)...)
	}
	return errs
}

// closest returns the known key nearest to s by edit distance, or "" when none is near.
func closest(s string, known map[string]reflect.Type) string {
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, bestD := "", len(s)/2+2
	for _, k := range keys {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
