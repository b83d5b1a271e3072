package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// sqlRecorder is a pgx tracer that keeps the text of every statement run, batched ones
// included, once each.
type sqlRecorder struct {
	mu  sync.Mutex
	sql map[string]bool
}

func newSQLRecorder() *sqlRecorder { return &sqlRecorder{sql: map[string]bool{}} }

func (r *sqlRecorder) add(sql string) {
	r.mu.Lock()
	r.sql[sql] = true
	r.mu.Unlock()
}

// statements returns the statements recorded, sorted.
func (r *sqlRecorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.sql))
	for s := range r.sql {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (r *sqlRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (r *sqlRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (r *sqlRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tenantTablesOf returns the tenant tables of conn's schema: every table with an org_id column
// but the reference tables.
func tenantTablesOf(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	tenant, _, err := citusProblems(ctx, conn)
	return tenant, err
}

// isDML reports whether sql is a query or a data change, the statements the check plans.
func isDML(sql string) bool {
	return regexp.MustCompile(`(?is)^\s*(SELECT|WITH|INSERT|UPDATE|DELETE)\b`).MatchString(sql)
}

// orgFilterProblem plans sql on conn as a generic plan (its parameters unknown, as a
// distributed planner sees them) and returns "" when every scan of a tenant table in the plan
// is bounded by org_id: in its own index condition, filter or recheck, or in the condition of a
// join above it (which pairs it with a row already bounded). Otherwise it says which scan is
// not. Statements that are not queries or data changes, and those naming no tenant table, are
// not planned.
func orgFilterProblem(ctx context.Context, conn *pgx.Conn, sql string, tenant []string) (string, error) {
	if !isDML(sql) {
		return "", nil
	}
	names := false
	for _, tb := range tenant {
		if regexp.MustCompile(`\b` + tb + `\b`).MatchString(sql) {
			names = true
		}
	}
	if !names {
		return "", nil
	}
	n := 0
	for _, m := range regexp.MustCompile(`\$([0-9]+)`).FindAllStringSubmatch(sql, -1) {
		v, _ := strconv.Atoi(m[1])
		n = max(n, v)
	}
	if _, err := conn.Exec(ctx, `PREPARE callwire_org_check AS `+sql); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE callwire_org_check`) }()
	args := ""
	if n > 0 {
		args = "(" + strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ") + ")"
	}
	var raw []byte
	if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE callwire_org_check`+args).Scan(&raw); err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil {
		return "", err
	}
	var bad []string
	for _, p := range plans {
		p.Plan.unbounded(tenant, false, &bad)
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), nil
	}
	return "", nil
}

// planNode is one node of EXPLAIN (FORMAT JSON)'s plan, the fields the check reads.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	Alias       string     `json:"Alias"`
	IndexCond   string     `json:"Index Cond"`
	Filter      string     `json:"Filter"`
	RecheckCond string     `json:"Recheck Cond"`
	TIDCond     string     `json:"TID Cond"`
	HashCond    string     `json:"Hash Cond"`
	MergeCond   string     `json:"Merge Cond"`
	JoinFilter  string     `json:"Join Filter"`
	Plans       []planNode `json:"Plans"`
}

// unbounded appends to bad each scan of a tenant table under n that org_id does not bound;
// joined says whether a join above n has a condition on org_id.
func (n *planNode) unbounded(tenant []string, joined bool, bad *[]string) {
	onOrg := func(conds ...string) bool {
		return slices.ContainsFunc(conds, func(c string) bool { return strings.Contains(c, "org_id") })
	}
	joined = joined || onOrg(n.HashCond, n.MergeCond, n.JoinFilter)
	if n.NodeType != "ModifyTable" && slices.Contains(tenant, n.Relation) &&
		!joined && !onOrg(n.IndexCond, n.Filter, n.RecheckCond, n.TIDCond) {
		*bad = append(*bad, fmt.Sprintf("%s on %s (as %s) is not bounded by org_id", n.NodeType, n.Relation, n.Alias))
	}
	for i := range n.Plans {
		n.Plans[i].unbounded(tenant, joined, bad)
	}
}

// checkOrgFilters fails t for each of statements (as recorded from the store) that reads or
// changes a tenant table without bounding it by org_id (see orgFilterProblem), planned on a
// migrated schema through conn.
func checkOrgFilters(t *testing.T, conn *pgx.Conn, statements []string) {
	t.Helper()
	ctx := t.Context()
	tenant, err := tenantTablesOf(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	planned := 0
	for _, sql := range statements {
		problem, err := orgFilterProblem(ctx, conn, sql, tenant)
		if err != nil {
			t.Errorf("planning a statement of the store: %v\n%s", err, sql)
			continue
		}
		if problem != "" {
			t.Errorf("%s:\n%s", problem, sql)
		}
		if isDML(sql) {
			planned++
		}
	}
	if planned < 10 {
		t.Errorf("only %d statements planned of %d recorded: the recording missed the store's statements", planned, len(statements))
	}
	t.Logf("%d statements recorded, %d queries and data changes checked", len(statements), planned)
}

// TestOrgFilterCheck shows the check of TestContract telling statements bounded by org_id from
// those that are not.
func TestOrgFilterCheck(t *testing.T) {
	url := pgtest.URL(t)
	openStore(t, url, postgres.Options{})
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	tenant, err := tenantTablesOf(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql     string
		bounded bool
	}{
		{`SELECT id FROM calls WHERE org_id = $1 AND id = $2`, true},
		{`SELECT e.id FROM calls c JOIN call_events e ON e.org_id = c.org_id AND e.call_no = c.call_no
			WHERE c.org_id = $1 AND c.provider = $2`, true},
		{`UPDATE callbacks SET pending = false WHERE org_id = $1 AND number = $2`, true},
		{`SELECT name FROM orgs WHERE name = $1`, true}, // a reference table
		{`SELECT count(*) FROM calls`, false},
		{`SELECT id FROM calls WHERE id = $1`, false},
		{`SELECT e.id FROM calls c JOIN call_events e ON e.call_no = c.call_no WHERE c.org_id = $1`, false},
		{`UPDATE callbacks SET pending = false WHERE number = $1`, false},
		{`DELETE FROM callback_dismissals WHERE at < $1`, false},
	} {
		problem, err := orgFilterProblem(ctx, conn, tc.sql, tenant)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if (problem == "") != tc.bounded {
			t.Errorf("%s: problem %q, want bounded %v", tc.sql, problem, tc.bounded)
		}
	}
}
