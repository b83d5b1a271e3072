package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// sameTree reports where a and b differ, or "" when they are the same tree.
func sameTree(a, b *node, path string) string {
	switch {
	case a == nil || b == nil:
		if a != b {
			return path + ": one is nil"
		}
		return ""
	case a.kind != b.kind || a.b != b.b || a.text() != b.text() || a.start != b.start || a.end != b.end:
		return fmt.Sprintf("%s: %+v and %+v", path, *a, *b)
	case len(a.fields) != len(b.fields) || len(a.items) != len(b.items) || strings.Join(a.dups(), ",") != strings.Join(b.dups(), ","):
		return path + ": shapes differ"
	}
	for i := range a.fields {
		if a.fields[i].key != b.fields[i].key {
			return fmt.Sprintf("%s: key %q and %q", path, a.fields[i].key, b.fields[i].key)
		}
		if d := sameTree(a.fields[i].val, b.fields[i].val, path+"."+a.fields[i].key); d != "" {
			return d
		}
	}
	for i := range a.items {
		if d := sameTree(a.items[i], b.items[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// checkScan holds scanTree to parseTreeStd on data: when scanTree reads a tree, encoding/json
// reads the same one; when it gives up, encoding/json refuses data too (or data nests too deep).
func checkScan(t *testing.T, data []byte) {
	t.Helper()
	if !utf8.Valid(data) {
		return // parseTree refuses it before either runs
	}
	fast, ok := scanTree(data)
	std, err := parseTreeStd(data)
	switch {
	case ok && err != nil:
		t.Fatalf("scanTree read %q, which encoding/json refuses: %v", data, err)
	case !ok && err == nil:
		t.Fatalf("scanTree gave up on %q, which encoding/json reads", data)
	case ok:
		if d := sameTree(fast, std, "$"); d != "" {
			t.Fatalf("trees of %q differ at %s", data, d)
		}
	}
}

var scanCases = []string{
	`{}`, `[]`, ` {"a":1} `, "\t[\r\n]\n", `{"a":{"b":[1,2,{"c":null}]},"d":true,"e":false}`,
	`{"a":1,"a":2,"b":3,"a":4,"b":5}`,
	`{"k1":1,"k2":1,"k3":1,"k4":1,"k5":1,"k6":1,"k7":1,"k8":1,"k9":1,"k1":2,"k9":3}`,
	`0`, `-0`, `1.5e10`, `-12.25E-3`, `1E+2`, `"s"`, `true`, `null`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `--1`, `0x10`, `1.e5`, `Infinity`, `NaN`,
	`"\u00e9\n\t\\\/\"\b\f\r"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`,
	`"\ud83d\ud83d\ude00"`, `"\u12"`, `"\u12g4"`, `"\x"`, `"a` + "\x01" + `"`, `"unterminated`, `"\`,
	`{"a" 1}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{1:2}`, `{"a":1}}`, `{"a":1} x`, `{"a":1}{}`, `[`, `{`,
	`tru`, `nul`, `falsey`, `[true false]`, "\ufeff{}", `{"é":"ü"}`, `"` + strings.Repeat("a", 100) + `\n"`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestScanTreeAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range scanCases {
		checkScan(t, []byte(c))
	}
	for _, tc := range decodeCases() {
		checkScan(t, []byte(tc.body))
	}
	for _, e := range goldenEvents() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		checkScan(t, b)
	}
}

// FuzzScanTree holds scanTree to encoding/json on arbitrary bodies.
func FuzzScanTree(f *testing.F) {
	for _, c := range scanCases {
		if len(c) < 4096 {
			f.Add([]byte(c))
		}
	}
	for _, tc := range decodeCases() {
		if len(tc.body) <= 4096 {
			f.Add([]byte(tc.body))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScan(t, data) })
}

// dups is n's repeated keys, empty when none.
func (n *node) dups() []string {
	if n.dupKeys == nil {
		return nil
	}
	return *n.dupKeys
}

// scanTree is the tree of data read with a new scanner (see scanner.tree).
func scanTree(data []byte) (n *node, ok bool) {
	var s scanner
	return s.tree(data)
}
