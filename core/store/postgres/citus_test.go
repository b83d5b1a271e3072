package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// referenceTables are the tables docs/scaling.md makes Citus reference tables, copied whole to
// every node: every other table with an org_id column is a tenant table, distributed by it.
func referenceTables() []string { return []string{"orgs", "api_keys"} }

// TestCitusReady checks the migrated schema, whatever migrations it has, against what
// distributing the tenant tables by org_id needs (see citusProblems), then checks that the
// check finds what breaks it.
func TestCitusReady(t *testing.T) {
	url := pgtest.URL(t)
	openStore(t, url, postgres.Options{})
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tenant, problems, err := citusProblems(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(tenant) < 3 {
		t.Fatalf("tenant tables %v: the schema is not migrated", tenant)
	}
	t.Logf("tenant tables: %s", strings.Join(tenant, ", "))
	for _, p := range problems {
		t.Error(p)
	}

	// Tables that break each rule, added to the same schema, are each reported.
	if _, err := conn.Exec(ctx, `
		CREATE TABLE bad_pk (org_id text NOT NULL, id text PRIMARY KEY);
		CREATE TABLE bad_unique (org_id text NOT NULL, id text NOT NULL, n int NOT NULL, PRIMARY KEY (org_id, id));
		CREATE UNIQUE INDEX bad_unique_n ON bad_unique (n);
		CREATE TABLE bad_fk (org_id text NOT NULL, id text NOT NULL, other text COLLATE "C" NOT NULL, call_no bigint NOT NULL,
			PRIMARY KEY (org_id, id), FOREIGN KEY (other, call_no) REFERENCES calls (org_id, call_no));
		ALTER TABLE api_keys ADD COLUMN bad_call bigint, ADD FOREIGN KEY (org_id, bad_call) REFERENCES calls (org_id, call_no)`); err != nil {
		t.Fatal(err)
	}
	_, problems, err = citusProblems(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bad_pk.bad_pk_pkey", "bad_unique.bad_unique_n", "bad_fk.bad_fk_other_call_no_fkey",
		"api_keys.api_keys_org_id_bad_call_fkey"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want+":") }) {
			t.Errorf("no problem reported for %s; reported: %q", want, problems)
		}
	}
	if len(problems) != 4 {
		t.Errorf("problems %q, want one per broken rule", problems)
	}
}

// citusProblems returns the tenant tables of the current schema (every table with an org_id
// column but the reference tables) and what in the schema stops them from being distributed by
// org_id (docs/scaling.md, "Citus"), each problem starting with "table.constraint:":
//
//   - a primary key, unique constraint, exclusion constraint or unique index of a tenant table
//     that does not include org_id;
//   - a foreign key of a tenant table that does not include org_id or, when it references
//     another tenant table, does not pair org_id with that table's org_id (the rows of one
//     organization reference rows of the same organization, on the same node);
//   - a foreign key of a reference table to a tenant table.
func citusProblems(ctx context.Context, conn *pgx.Conn) (tenant, problems []string, err error) {
	rows, _ := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
			AND a.attname = 'org_id' AND NOT a.attisdropped ORDER BY 1`)
	withOrg, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	for _, name := range withOrg {
		if !slices.Contains(referenceTables(), name) {
			tenant = append(tenant, name)
		}
	}
	for _, ref := range referenceTables() {
		if !slices.Contains(withOrg, ref) {
			problems = append(problems, ref+".: the reference table is not in the schema, or has no org_id")
		}
	}

	// Each constraint (and unique index without one) with its columns' names, in key order, and
	// for a foreign key the referenced table and columns.
	rows, _ = conn.Query(ctx, `
		SELECT t.relname, k.conname, k.contype::text,
			ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY u(n, i)
				JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.i),
			COALESCE(r.relname, ''),
			ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY u(n, i)
				JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.i)
		FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid LEFT JOIN pg_class r ON r.oid = k.confrelid
		WHERE t.relnamespace = current_schema()::regnamespace AND k.contype IN ('p', 'u', 'f', 'x')
		UNION ALL
		SELECT t.relname, i.relname, 'unique index',
			ARRAY(SELECT a.attname::text FROM unnest(x.indkey::int2[]) WITH ORDINALITY u(n, o)
				JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.n ORDER BY u.o),
			'', '{}'::text[]
		FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
		WHERE t.relnamespace = current_schema()::regnamespace AND x.indisunique
			AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)
		ORDER BY 1, 2`)
	var (
		table, name, kind, refTable string
		cols, refCols               []string
	)
	_, err = pgx.ForEachRow(rows, []any{&table, &name, &kind, &cols, &refTable, &refCols}, func() error {
		isTenant, refIsTenant := slices.Contains(tenant, table), slices.Contains(tenant, refTable)
		at := table + "." + name + ": "
		switch {
		case !isTenant && kind == "f" && refIsTenant:
			problems = append(problems, at+"reference table "+table+" has a foreign key to tenant table "+refTable)
		case !isTenant:
		case !slices.Contains(cols, "org_id"):
			problems = append(problems, fmt.Sprintf("%s%s on %v does not include org_id", at, kindName(kind), cols))
		case kind == "f" && refIsTenant && refCols[slices.Index(cols, "org_id")] != "org_id":
			problems = append(problems, fmt.Sprintf("%sforeign key %v -> %s%v does not pair org_id with org_id", at, cols, refTable, refCols))
		}
		return nil
	})
	return tenant, problems, err
}

// kindName names a pg_constraint.contype, or passes "unique index" through.
func kindName(kind string) string {
	switch kind {
	case "p":
		return "primary key"
	case "u":
		return "unique constraint"
	case "f":
		return "foreign key"
	case "x":
		return "exclusion constraint"
	}
	return kind
}
