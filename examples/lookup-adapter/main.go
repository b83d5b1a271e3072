// Command lookup-adapter is a small caller lookup adapter for callwire: it answers
// GET /lookup?number=<E.164> with the clients of a CSV or JSON file who have that number, in the
// shape docs/caller-lookup.md describes. A clinic's real adapter asks its own client system
// instead of a file; everything else stays the same.
//
// Usage:
//
//	LOOKUP_ADAPTER_TOKEN=s3cret lookup-adapter -clients clients.csv -listen 127.0.0.1:8081
//
// The CSV file has a header row naming the columns number, externalId and name (in any order);
// the JSON file is an array of {"number", "externalId", "name"} objects. One number may belong
// to several clients. When LOOKUP_ADAPTER_TOKEN is set, requests must carry
// "Authorization: Bearer <token>" or are answered 401.
//
// Point an organization at it with:
//
//	callwire orgs update ORG_ID --lookup-url http://127.0.0.1:8081/lookup --lookup-token s3cret
package main

import (
	"context"
	"crypto/subtle"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// client is one record of the client system.
type client struct {
	Number     string `json:"number"`
	ExternalID string `json:"externalId"`
	Name       string `json:"name"`
}

// match is one client in an answer.
type match struct {
	ExternalID string `json:"externalId"`
	Name       string `json:"name"`
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on, host:port")
	file := flag.String("clients", "clients.csv", "the clients: a .csv or .json file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *file, os.Getenv("LOOKUP_ADAPTER_TOKEN"), os.Stdout); err != nil {
		log.Fatalf("lookup-adapter: %v", err)
	}
}

// run loads the clients, serves until ctx ends, and prints "listening on <URL>" to out once it
// accepts requests.
func run(ctx context.Context, listen, file, token string, out io.Writer) error {
	dir, err := load(file)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /lookup", handler(dir, token))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "listening on http://%s (%d numbers)\n", ln.Addr(), len(dir))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// handler answers lookups from dir, a map of number to clients.
func handler(dir map[string][]match, token string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lookup"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required"})
			return
		}
		number := r.URL.Query().Get("number")
		if !e164.MatchString(number) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "number must be E.164, such as +442071234567"})
			return
		}
		clients := dir[number]
		if clients == nil {
			clients = []match{}
		}
		writeJSON(w, http.StatusOK, map[string][]match{"clients": clients})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// load reads the clients file into a map of number to clients, in file order.
func load(path string) (map[string][]match, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var records []client
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		if err := json.NewDecoder(f).Decode(&records); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case ".csv":
		records, err = readCSV(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("%s: want a .csv or .json file", path)
	}
	dir := map[string][]match{}
	for i, c := range records {
		c.Number, c.ExternalID, c.Name = strings.TrimSpace(c.Number), strings.TrimSpace(c.ExternalID), strings.TrimSpace(c.Name)
		if !e164.MatchString(c.Number) || c.ExternalID == "" || c.Name == "" {
			return nil, fmt.Errorf("%s: record %d: want an E.164 number, an externalId and a name", path, i+1)
		}
		dir[c.Number] = append(dir[c.Number], match{ExternalID: c.ExternalID, Name: c.Name})
	}
	return dir, nil
}

// readCSV reads records whose columns the header row names.
func readCSV(r io.Reader) ([]client, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no header row")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[strings.TrimSpace(name)] = i
	}
	for _, name := range []string{"number", "externalId", "name"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("the header row has no %q column", name)
		}
	}
	var out []client
	for _, row := range rows[1:] {
		out = append(out, client{Number: row[col["number"]], ExternalID: row[col["externalId"]], Name: row[col["name"]]})
	}
	return out, nil
}
