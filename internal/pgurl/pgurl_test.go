package pgurl

import "testing"

func TestWithSearchPath(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", "postgres://u@127.0.0.1:5432/db?search_path=s1&sslmode=disable"},
		{"postgresql://u@h/db?search_path=old", "postgresql://u@h/db?search_path=s1"},
		{"host=127.0.0.1 dbname=db", "host=127.0.0.1 dbname=db search_path=s1"},
	} {
		got, err := WithSearchPath(tc.base, "s1")
		if err != nil || got != tc.want {
			t.Errorf("WithSearchPath(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
	if _, err := WithSearchPath("postgres://u@h:bad/db", "s1"); err == nil {
		t.Error("a URL that does not parse gave no error")
	}
}
