// Package confload loads a callwire program's configuration (the core's, the agent's) into its
// typed struct, in four layers, each overriding the one before: built-in defaults, then a YAML
// file, then environment variables, then command-line flags.
//
// The struct is the one list of keys: its koanf tags name the sections and keys the file may
// hold, the variables that are read, and the defaults' keys. A key in the file that the struct
// does not have is an error naming it (and the nearest known key, when one is close): a typo must
// not leave a server on its defaults without a word. A variable under the program's prefix that
// sets nothing is only a warning, returned for the caller to log: the environment is shared with
// other programs and outlives configuration changes.
package confload

import (
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Spec describes one program's configuration.
type Spec[T any] struct {
	// Name names the configuration in errors: "configuration" gives "configuration: read ...:"
	// and "invalid configuration: ...". Required.
	Name string
	// Defaults is the configuration used when nothing is set. Its type, a struct, gives the keys:
	// every exported field needs a koanf tag; a struct field is a section; a slice of structs is
	// a list whose entries are checked like sections; a map is free-form (its keys are never
	// checked); anything else is a key.
	Defaults T
	// EnvPrefix starts every variable of this configuration, such as "CALLWIRE_". The variable of
	// a key outside lists is the prefix, then the key in upper case with each '.' written as '_':
	// server.body_limit is CALLWIRE_SERVER_BODY_LIMIT. Required.
	EnvPrefix string
	// EnvAliases maps further variable names, under EnvPrefix, to keys.
	EnvAliases map[string]string
	// EnvElsewhere lists prefixes, under EnvPrefix, of variables that belong to another
	// program's configuration (the agent's CALLWIRE_AGENT_ for the core): they are neither read
	// nor reported.
	EnvElsewhere []string
	// Problems, when set, lists what is wrong with a configuration that decoded. Load reports
	// them together with the file's unknown keys.
	Problems func(T) []error
}

// Loader loads the configuration a Spec describes. Make one with New.
type Loader[T any] struct {
	spec     Spec[T]
	root     *node
	defaults map[string]any
	// vars maps each variable that sets a key to the key.
	vars map[string]string
}

// New returns the Loader of s, having checked that s's struct is fully tagged and that every
// variable, alias and prefix is consistent.
func New[T any](s Spec[T]) (*Loader[T], error) {
	if s.Name == "" || s.EnvPrefix == "" {
		return nil, errors.New("confload: a spec needs a name and an environment prefix")
	}
	t := reflect.TypeOf(s.Defaults)
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("confload: %s: the defaults must be a struct, got %v", s.Name, t)
	}
	root, err := schemaOf(t, "")
	if err != nil {
		return nil, fmt.Errorf("confload: %s: %w", s.Name, err)
	}
	l := &Loader[T]{spec: s, root: root, defaults: map[string]any{}, vars: map[string]string{}}
	flatten(reflect.ValueOf(s.Defaults), root, "", l.defaults)
	add := func(name, key string) error {
		if !strings.HasPrefix(name, s.EnvPrefix) || l.elsewhere(name) {
			return fmt.Errorf("confload: %s: variable %s is not under %s", s.Name, name, s.EnvPrefix)
		}
		if other, ok := l.vars[name]; ok && other != key {
			return fmt.Errorf("confload: %s: variable %s would set both %s and %s", s.Name, name, other, key)
		}
		l.vars[name] = key
		return nil
	}
	for _, key := range root.settable("") {
		if err := add(s.EnvPrefix+strings.ToUpper(strings.ReplaceAll(key, ".", "_")), key); err != nil {
			return nil, err
		}
	}
	for name, key := range s.EnvAliases {
		if root.lookup(key) == nil || root.lookup(key).kind != leaf {
			return nil, fmt.Errorf("confload: %s: alias %s names no key: %s", s.Name, name, key)
		}
		if err := add(name, key); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Variables returns, sorted, every variable that sets a key: one per key outside lists, and the
// aliases.
func (l *Loader[T]) Variables() []string {
	names := make([]string, 0, len(l.vars))
	for name := range l.vars {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Load builds the configuration: the defaults, then the YAML file at path (skipped when path is
// empty), then the variables of environ (os.Environ() in production) under the prefix, then the
// flags of fs that were set on the command line (nil for none), each mapped to a key through
// flagKeys, for example "listen" → "server.listen"; unmapped flags are ignored, and a flag mapped
// to a key the struct lacks is an error.
//
// The error, when the file or the values are wrong, lists every problem at once: each unknown key
// in the file (an *UnknownKeyError), every value that does not decode, and Spec.Problems. The
// unknown variables are returned even then, sorted by name, for the caller to log as warnings;
// variables of other programs (EnvElsewhere, and the project's variables that are not
// configuration: see NotConfiguration) are not among them.
func (l *Loader[T]) Load(path string, environ []string, fs *pflag.FlagSet, flagKeys map[string]string) (T, []UnknownVariable, error) {
	var zero T
	name := l.spec.Name
	for flag, key := range flagKeys {
		if n := l.root.lookup(key); n == nil || n.kind != leaf {
			return zero, nil, fmt.Errorf("%s: flag --%s maps to no key: %s", name, flag, key)
		}
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(l.defaults, "."), nil); err != nil {
		return zero, nil, fmt.Errorf("%s: defaults: %w", name, err)
	}
	var problems []error
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return zero, nil, fmt.Errorf("%s: %w", name, err)
		}
		m, err := yaml.Parser().Unmarshal(b)
		if err != nil {
			return zero, nil, fmt.Errorf("%s: read %s: %w", name, path, err)
		}
		problems = append(problems, l.root.unknownKeys(m, "")...)
		if len(m) > 0 {
			if err := k.Load(confmap.Provider(m, ""), nil); err != nil {
				return zero, nil, fmt.Errorf("%s: read %s: %w", name, path, err)
			}
		}
	}
	envMap, unknown := l.environment(environ)
	if err := k.Load(confmap.Provider(envMap, "."), nil); err != nil {
		return zero, unknown, fmt.Errorf("%s: environment: %w", name, err)
	}
	if fs != nil {
		err := k.Load(posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
			key, ok := flagKeys[f.Name]
			if !ok || !f.Changed {
				return "", nil
			}
			return key, posflag.FlagVal(fs, f)
		}), nil)
		if err != nil {
			return zero, unknown, fmt.Errorf("%s: flags: %w", name, err)
		}
	}
	var c T
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		problems = append(problems, err)
	} else if l.spec.Problems != nil {
		problems = append(problems, l.spec.Problems(c)...)
	}
	if len(problems) > 0 {
		return zero, unknown, fmt.Errorf("invalid %s: %w", name, errors.Join(problems...))
	}
	return c, unknown, nil
}

// environment returns the keys environ sets and the variables under the prefix that set none.
func (l *Loader[T]) environment(environ []string) (map[string]any, []UnknownVariable) {
	set := map[string]any{}
	var unknown []UnknownVariable
	seen := map[string]bool{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, l.spec.EnvPrefix) || l.elsewhere(name) {
			continue
		}
		if key, ok := l.vars[name]; ok {
			set[key] = val
			continue
		}
		if seen[name] || NotConfiguration(name) {
			continue
		}
		seen[name] = true
		u := UnknownVariable{Name: name}
		if near := nearest(strings.TrimPrefix(name, l.spec.EnvPrefix), l.varSuffixes()); near != "" {
			u.Suggestion = l.spec.EnvPrefix + near
		}
		unknown = append(unknown, u)
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Name < unknown[j].Name })
	return set, unknown
}

func (l *Loader[T]) varSuffixes() []string {
	names := l.Variables()
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, l.spec.EnvPrefix)
	}
	return names
}

func (l *Loader[T]) elsewhere(name string) bool {
	for _, p := range l.spec.EnvElsewhere {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// NotConfiguration reports whether the variable name belongs to the project but is no
// configuration of any program, so that no loader warns about it: the test suites' service
// addresses and switches (every name starting CALLWIRE_TEST_, which is reserved for them, and
// the others below), the benchmark's database and Redis, the marker go-plugin sets in a
// translator's environment, and the markers that make a test binary act as a helper child
// process. A test in cmd/callwire fails when the code reads a CALLWIRE_ variable that is
// neither configuration nor listed here.
func NotConfiguration(name string) bool {
	if strings.HasPrefix(name, "CALLWIRE_TEST_") {
		return true
	}
	switch name {
	case "CALLWIRE_REQUIRE_SERVICES", // tests: fail, rather than skip, without Postgres or Redis
		"CALLWIRE_REQUIRE_BROWSER",     // tests: fail, rather than skip, without Chromium
		"CALLWIRE_REQUIRE_SIP",         // tests: fail, rather than skip, without sipp and Kamailio
		"CALLWIRE_REQUIRE_HAPROXY",     // tests: fail, rather than skip, the cluster topology without HAProxy
		"CALLWIRE_CHROMIUM",            // tests: the Chromium binary to use
		"CALLWIRE_BROWSER_INSTALL",     // tests: 0 stops the browser test installing Chromium
		"CALLWIRE_ARTIFACTS_DIR",       // tests: where the browser test leaves its screenshot
		"CALLWIRE_BENCH_DATABASE_URL",  // callwire-bench: the database to measure
		"CALLWIRE_BENCH_REDIS_URL",     // callwire-bench: the Redis of the popup phases' second pass
		"CALLWIRE_TRANSLATOR",          // plugins: go-plugin's handshake cookie in a translator's environment
		"CALLWIRE_OUTBOX_CRASH_HELPER", // sdk/outbox tests: the child process that is killed
		"CALLWIRE_AGENT_KILL_HELPER":   // plugins/agent tests: the child process that is killed
		return true
	}
	return false
}

// UnknownVariable is an environment variable under a configuration's prefix that sets nothing,
// most likely a misspelt one.
type UnknownVariable struct {
	// Name is the variable, such as CALLWIRE_DATABSE_URL.
	Name string
	// Suggestion is the nearest variable that sets a key, such as CALLWIRE_DATABASE_URL, or ""
	// when none is close.
	Suggestion string
}

// String describes u in one sentence.
func (u UnknownVariable) String() string {
	s := "unknown environment variable " + u.Name + " ignored"
	if u.Suggestion != "" {
		s += "; did you mean " + u.Suggestion + "?"
	}
	return s
}

// Warn logs u on log at warn level, with the variable (and the suggestion, when there is one)
// as attributes.
func (u UnknownVariable) Warn(log *slog.Logger) {
	args := []any{"variable", u.Name}
	if u.Suggestion != "" {
		args = append(args, "did_you_mean", u.Suggestion)
	}
	log.Warn("unknown environment variable ignored", args...)
}

// UnknownKeyError is a key in a configuration file that the configuration does not have.
type UnknownKeyError struct {
	// Key is the key's full path, such as server.listn or translators[0].nmae.
	Key string
	// Suggestion is the nearest known key's full path, or "" when none is close.
	Suggestion string
	// Dotted is set when the file wrote a dotted name, such as database.url, at a level where it
	// names a known key once nested: the file must nest it.
	Dotted bool
}

func (e *UnknownKeyError) Error() string {
	switch {
	case e.Dotted:
		return e.Key + ": unknown key; in the file, write each part of a dotted key on its own indented line"
	case e.Suggestion != "":
		return e.Key + ": unknown key; did you mean " + e.Suggestion + "?"
	}
	return e.Key + ": unknown key"
}

type kind int

const (
	leaf     kind = iota // a value
	section              // a struct: its keys are checked
	list                 // a slice of structs: each entry is checked as a section
	freeForm             // a map: nothing inside is checked
)

// node is the shape of one value of the configuration.
type node struct {
	kind   kind
	fields []field // section: in struct order
	elem   *node   // list: an entry
}

type field struct {
	name  string
	index int
	node  *node
}

// textual reports whether values of type t decode from text themselves, like time.Time: such a
// struct is a key, not a section.
func textual(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// schemaOf returns the shape of values of type t; path names t in errors.
func schemaOf(t reflect.Type, path string) (*node, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case textual(t):
		return &node{kind: leaf}, nil
	case t.Kind() == reflect.Map:
		return &node{kind: freeForm}, nil
	case t.Kind() == reflect.Slice && elemIsStruct(t):
		elem, err := schemaOf(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &node{kind: list, elem: elem}, nil
	case t.Kind() != reflect.Struct:
		return &node{kind: leaf}, nil
	}
	n := &node{kind: section}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if name == "" || name == "-" {
			return nil, fmt.Errorf("field %s.%s has no koanf tag", t.Name(), f.Name)
		}
		if n.child(name) != nil {
			return nil, fmt.Errorf("key %s is tagged twice in %s", join(path, name), t.Name())
		}
		child, err := schemaOf(f.Type, join(path, name))
		if err != nil {
			return nil, err
		}
		n.fields = append(n.fields, field{name: name, index: i, node: child})
	}
	return n, nil
}

func elemIsStruct(t reflect.Type) bool {
	e := t.Elem()
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	return e.Kind() == reflect.Struct && !textual(e)
}

func (n *node) child(name string) *node {
	for _, f := range n.fields {
		if f.name == name {
			return f.node
		}
	}
	return nil
}

// lookup returns the node of the dotted key below n, or nil.
func (n *node) lookup(key string) *node {
	for part := range strings.SplitSeq(key, ".") {
		if n == nil || n.kind != section {
			return nil
		}
		n = n.child(part)
	}
	return n
}

// settable returns the dotted keys of the leaves below the section n that are reached through
// sections only: the keys a variable or a flag may set.
func (n *node) settable(path string) []string {
	var keys []string
	for _, f := range n.fields {
		switch f.node.kind {
		case leaf:
			keys = append(keys, join(path, f.name))
		case section:
			keys = append(keys, f.node.settable(join(path, f.name))...)
		}
	}
	return keys
}

// unknownKeys returns an *UnknownKeyError for every key of m, a section read from the file at
// path, that n does not have, sorted by key.
func (n *node) unknownKeys(m map[string]any, path string) []error {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	known := make([]string, len(n.fields))
	for i, f := range n.fields {
		known[i] = f.name
	}
	var errs []error
	for _, name := range names {
		child := n.child(name)
		if child == nil {
			e := &UnknownKeyError{Key: join(path, name)}
			if strings.Contains(name, ".") && n.lookup(name) != nil {
				e.Dotted = true
			} else if near := nearest(name, known); near != "" {
				e.Suggestion = join(path, near)
			}
			errs = append(errs, e)
			continue
		}
		switch child.kind {
		case section:
			if sub, ok := m[name].(map[string]any); ok {
				errs = append(errs, child.unknownKeys(sub, join(path, name))...)
			}
		case list:
			entries, _ := m[name].([]any)
			for i, e := range entries {
				if sub, ok := e.(map[string]any); ok {
					errs = append(errs, child.elem.unknownKeys(sub, fmt.Sprintf("%s[%d]", join(path, name), i))...)
				}
			}
		}
	}
	return errs
}

// flatten adds to out the value of every key of v, of shape n, under path: durations as text,
// lists and maps only when set.
func flatten(v reflect.Value, n *node, path string, out map[string]any) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch n.kind {
	case section:
		for _, f := range n.fields {
			flatten(v.Field(f.index), f.node, join(path, f.name), out)
		}
	case list, freeForm:
		if !v.IsNil() && v.Len() > 0 {
			out[path] = v.Interface()
		}
	default:
		if d, ok := v.Interface().(time.Duration); ok {
			out[path] = d.String()
		} else {
			out[path] = v.Interface()
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// nearest returns the candidate closest to name (ignoring case) when it is close enough to be
// the likely intent, else "". Close enough: at most a third of the longer name's length in edits
// (insertions, deletions, substitutions, swaps of neighbours), at least one and at most three.
// Ties go to the first candidate in sorted order.
func nearest(name string, candidates []string) string {
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	best, bestDist := "", 0
	for _, c := range sorted {
		d := distance(strings.ToLower(name), strings.ToLower(c))
		limit := min(max(max(len(name), len(c))/3, 1), 3)
		if d > limit || d >= max(len(name), len(c)) {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b: the fewest insertions,
// deletions, substitutions and swaps of neighbouring bytes that turn a into b.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
