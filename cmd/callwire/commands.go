package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	fiberlog "github.com/gofiber/fiber/v2/log"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/confload"
)

// loadConfig reads the configuration for cmd: --config, the environment, and the flags of cmd
// that map to configuration keys. It returns the logger the configuration asks for, on which it
// has warned of every CALLWIRE_ variable that sets nothing; when the configuration is wrong, those
// warnings go to a logger with the default settings before the error is returned.
func loadConfig(cmd *cobra.Command, flagKeys map[string]string) (config.Config, *slog.Logger, error) {
	path, _ := cmd.Flags().GetString("config")
	c, unknown, err := config.Load(path, os.Environ(), cmd.Flags(), flagKeys)
	if err != nil {
		warnUnknown(server.NewLogger(config.Defaults().Log, os.Stderr), unknown)
		return config.Config{}, nil, err
	}
	log := server.NewLogger(c.Log, os.Stderr)
	warnUnknown(log, unknown)
	return c, log, nil
}

// warnUnknown logs a warning on log for each variable of vars.
func warnUnknown(log *slog.Logger, vars []confload.UnknownVariable) {
	for _, v := range vars {
		v.Warn(log)
	}
}

// withStore loads the configuration, opens (and migrates) the store, and runs fn with it.
func withStore(cmd *cobra.Command, fn func(st store.Store) error) error {
	c, _, err := loadConfig(cmd, nil)
	if err != nil {
		return err
	}
	st, err := server.OpenStore(cmd.Context(), c.Database)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	return fn(st)
}

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the ingest server",
		Long: "Run the ingest server. With no configuration it keeps data in the embedded store " +
			"(data/callwire.db); set database.url (CALLWIRE_DATABASE_URL) for PostgreSQL.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, log, err := loadConfig(cmd, map[string]string{"listen": "server.listen"})
			if err != nil {
				return err
			}
			// The Redis client and Fiber log through process-wide loggers of their own, plain
			// text on stderr by default: route them into the structured log.
			redisLog, err := popup.NewRedisLogger(log)
			if err != nil {
				return err
			}
			redis.SetLogger(redisLog)
			fiberLog, err := httpapi.NewFiberLogger(log)
			if err != nil {
				return err
			}
			fiberlog.SetLogger(fiberLog)
			ctx := cmd.Context()
			st, err := server.OpenStore(ctx, c.Database)
			if err != nil {
				return fmt.Errorf("open store: %w", err)
			}
			defer st.Close()
			limit := server.ApplyMemoryLimit(c.Server, st, os.Getenv)
			// Requests keep their context through a graceful shutdown; only the listener follows
			// the signal.
			srv, err := server.New(context.WithoutCancel(ctx), c, server.Options{Store: st, Logger: log})
			if err != nil {
				return err
			}
			storeName := "embedded (" + c.Database.Path + ")"
			if c.Database.URL != "" {
				storeName = "postgres"
			}
			return srv.Run(ctx, c.Server.Listen, func(a net.Addr) {
				log.Info("callwire listening", "addr", a.String(), "store", storeName, "version", version, "memory_limit", memoryLimitText(limit))
			})
		},
	}
	cmd.Flags().String("listen", "", "address to listen on, host:port (default :8080)")
	return cmd
}

func newMigrate() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			if err := server.Migrate(cmd.Context(), c.Database); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return nil
		},
	}
}

func outputFlag(cmd *cobra.Command) {
	cmd.Flags().StringP("output", "o", "text", "output format: text or json")
}

func jsonOutput(cmd *cobra.Command) (bool, error) {
	o, _ := cmd.Flags().GetString("output")
	switch o {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, usageError{fmt.Errorf("--output must be text or json, got %q", o)}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type orgJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// Lookup is null when the organization has no caller lookup.
	Lookup *lookupJSON `json:"lookup"`
	// TimeZone is the IANA name of the organization's time zone, "UTC" by default.
	TimeZone string `json:"timezone"`
	// Country is the ISO 3166-1 alpha-2 code numbers in national form are read in, "" for none.
	Country string `json:"country"`
	// CallbackNeedsAnswer is the to-call-back list's setting, shown by orgs update when it set it.
	CallbackNeedsAnswer *bool `json:"callbackNeedsAnswer,omitempty"`
	// RetentionDays is how many days calls are kept after their last activity; null keeps them
	// forever.
	RetentionDays *int `json:"retentionDays"`
}

// lookupJSON shows an organization's caller lookup. The token is never shown in full.
type lookupJSON struct {
	URL string `json:"url"`
	// Token is "" when none is set, otherwise masked (see maskToken).
	Token string `json:"token"`
	// Timeout is the organization's own, or "" for the server's lookup.timeout.
	Timeout string `json:"timeout"`
}

func orgView(o store.Org) orgJSON {
	v := orgJSON{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt.UTC(), TimeZone: o.Region.TimeZone, Country: o.Region.Country}
	if v.TimeZone == "" {
		v.TimeZone = "UTC"
	}
	if o.RetentionDays > 0 {
		days := o.RetentionDays
		v.RetentionDays = &days
	}
	if o.Lookup.URL != "" {
		v.Lookup = &lookupJSON{URL: o.Lookup.URL, Token: maskToken(o.Lookup.Token)}
		if o.Lookup.Timeout > 0 {
			v.Lookup.Timeout = o.Lookup.Timeout.String()
		}
	}
	return v
}

// retentionText says how long an organization keeps its calls, for text output.
func retentionText(days *int) string {
	switch {
	case days == nil:
		return "forever"
	case *days == 1:
		return "1 day"
	}
	return fmt.Sprintf("%d days", *days)
}

// parseRetention reads --retention-days: a whole number of days from 1 to
// store.MaxRetentionDays, or "forever" (or "") for 0, which keeps calls forever. A 0 is refused
// rather than read as forever, since it could as well be taken to mean "keep nothing".
func parseRetention(raw string) (int, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || strings.EqualFold(raw, "forever") {
		return 0, nil
	}
	days, err := strconv.Atoi(raw)
	if err != nil || days < 1 || days > store.MaxRetentionDays {
		return 0, fmt.Errorf("--retention-days: want a whole number of days from 1 to %d, or forever, got %q", store.MaxRetentionDays, raw)
	}
	return days, nil
}

// maskToken returns "" for no token, and otherwise "…" followed by the token's last four
// characters, or "…" alone when the token is shorter than twelve characters (four would give too
// much of it away).
func maskToken(tok string) string {
	switch {
	case tok == "":
		return ""
	case len(tok) < 12:
		return "…"
	}
	return "…" + tok[len(tok)-4:]
}

// maxLookupTimeout is the longest lookup timeout an organization may set: the phone is ringing.
const maxLookupTimeout = 10 * time.Second

// parseLookup validates the flags of orgs update into a store.Lookup, listing every problem.
func parseLookup(rawURL, token, timeout string, tokenSet, timeoutSet bool) (store.Lookup, []string) {
	var problems []string
	if rawURL == "" {
		if tokenSet || timeoutSet {
			problems = append(problems, `--lookup-token and --lookup-timeout need a --lookup-url; --lookup-url "" removes the lookup`)
		}
		return store.Lookup{}, problems
	}
	l := store.Lookup{URL: rawURL, Token: token}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		problems = append(problems, "--lookup-url must be an absolute http:// or https:// URL, such as https://crm.example/callwire/lookup")
	case u.User != nil:
		problems = append(problems, "--lookup-url must not carry credentials; use --lookup-token")
	case u.Fragment != "" || strings.HasSuffix(rawURL, "#"):
		problems = append(problems, "--lookup-url must not have a #fragment")
	case len(rawURL) > 2048:
		problems = append(problems, "--lookup-url must be at most 2048 characters")
	}
	if tokenSet {
		switch {
		case token == "":
			problems = append(problems, "--lookup-token must not be empty; leave it out for no token")
		case len(token) > 4096:
			problems = append(problems, "--lookup-token must be at most 4096 characters")
		case strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
			problems = append(problems, "--lookup-token must be printable ASCII without spaces")
		}
	}
	if timeoutSet {
		d, err := time.ParseDuration(timeout)
		switch {
		case err != nil:
			problems = append(problems, "--lookup-timeout must be a duration such as 500ms or 2s")
		case d <= 0:
			problems = append(problems, "--lookup-timeout must be positive")
		case d > maxLookupTimeout:
			problems = append(problems, "--lookup-timeout must be at most 10s: the phone is ringing")
		default:
			l.Timeout = d
		}
	}
	return l, problems
}

func newOrgs() *cobra.Command {
	orgs := &cobra.Command{Use: "orgs", Short: "Manage organizations (clinics)"}
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an organization and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			name, _ := cmd.Flags().GetString("name")
			name = strings.TrimSpace(name)
			if name == "" {
				return usageError{errors.New("--name is required")}
			}
			if len(name) > 200 {
				return usageError{errors.New("--name must be at most 200 characters")}
			}
			return withStore(cmd, func(st store.Store) error {
				o := store.Org{ID: uuid.Must(uuid.NewV7()).String(), Name: name, CreatedAt: time.Now().UTC()}
				if err := st.CreateOrg(cmd.Context(), o); err != nil {
					return fmt.Errorf("create organization: %w", err)
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), orgView(o))
				}
				fmt.Fprintln(cmd.OutOrStdout(), o.ID)
				return nil
			})
		},
	}
	create.Flags().String("name", "", "the organization's name")
	outputFlag(create)
	list := &cobra.Command{
		Use:   "list",
		Short: "List organizations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			return withStore(cmd, func(st store.Store) error {
				list, err := st.ListOrgs(cmd.Context())
				if err != nil {
					return fmt.Errorf("list organizations: %w", err)
				}
				out := make([]orgJSON, len(list))
				for i, o := range list {
					out[i] = orgView(o)
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tCREATED\tLOOKUP\tTIMEZONE\tCOUNTRY\tRETENTION")
				for _, o := range out {
					lookup, country := "no", o.Country
					if o.Lookup != nil {
						lookup = "yes"
					}
					if country == "" {
						country = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.ID, o.Name, o.CreatedAt.Format(time.RFC3339), lookup, o.TimeZone, country,
						retentionText(o.RetentionDays))
				}
				return tw.Flush()
			})
		},
	}
	outputFlag(list)

	update := &cobra.Command{
		Use:   "update ORG_ID [--lookup-url URL [--lookup-token TOKEN] [--lookup-timeout DURATION]] [--timezone ZONE] [--country CC] [--callback-needs-answer[=false]] [--retention-days N|forever]",
		Short: "Set an organization's caller lookup endpoint, time zone, country, to-call-back setting or retention",
		Long: "Set the organization's caller lookup: callwire asks GET URL?number=<E.164> with " +
			"\"Authorization: Bearer TOKEN\" while a phone rings (see docs/caller-lookup.md). Each lookup " +
			"update replaces the whole lookup: a token or timeout left out is cleared. --lookup-url \"\" removes " +
			"the lookup. The token is stored and never printed back in full. Running servers pick the " +
			"change up within a few seconds.\n\n" +
			"--timezone sets the IANA time zone (such as Europe/London; \"\" for UTC, the default) in which " +
			"dates in call history filters, CSV exports and the desk are read. --country sets the ISO 3166-1 " +
			"alpha-2 code (such as GB; \"\" for none, the default) in which a number search written in " +
			"national form is read (see docs/history.md).\n\n" +
			"--callback-needs-answer makes a call placed to a number on the to-call-back list settle its " +
			"item only when it was answered (=false: any attempt settles it, the default); the organization's " +
			"items are recomputed under it.\n\n" +
			"--retention-days N keeps the organization's calls N days (1 to 36500) after their last " +
			"activity: the server's retention sweeper then removes them with their events (see " +
			"docs/operations.md). --retention-days forever, the default, keeps them forever.\n\n" +
			"A setting left out is kept.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			setLookup := f.Changed("lookup-url")
			setZone, setCountry := f.Changed("timezone"), f.Changed("country")
			setNeedsAnswer := f.Changed("callback-needs-answer")
			needsAnswer, _ := f.GetBool("callback-needs-answer")
			setRetention := f.Changed("retention-days")
			if !setLookup && !setZone && !setCountry && !setNeedsAnswer && !setRetention {
				if f.Changed("lookup-token") || f.Changed("lookup-timeout") {
					return usageError{errors.New(`--lookup-token and --lookup-timeout need a --lookup-url; --lookup-url "" removes the lookup`)}
				}
				return usageError{errors.New(`nothing to update: give --lookup-url, --timezone, --country, --callback-needs-answer or --retention-days`)}
			}
			var (
				l        store.Lookup
				problems []string
			)
			if setLookup || f.Changed("lookup-token") || f.Changed("lookup-timeout") {
				rawURL, _ := f.GetString("lookup-url")
				token, _ := f.GetString("lookup-token")
				timeout, _ := f.GetString("lookup-timeout")
				l, problems = parseLookup(rawURL, token, timeout, f.Changed("lookup-token"), f.Changed("lookup-timeout"))
			}
			zone, _ := f.GetString("timezone")
			country, _ := f.GetString("country")
			zone, country = strings.TrimSpace(zone), strings.ToUpper(strings.TrimSpace(country))
			if setZone {
				if err := (store.Region{TimeZone: zone}).Validate(); err != nil {
					problems = append(problems, "--timezone: "+err.Error())
				}
			}
			if setCountry {
				if err := (store.Region{Country: country}).Validate(); err != nil {
					problems = append(problems, "--country: "+err.Error())
				}
			}
			var days int
			if setRetention {
				raw, _ := f.GetString("retention-days")
				if days, err = parseRetention(raw); err != nil {
					problems = append(problems, err.Error())
				}
			}
			if len(problems) > 0 {
				return usageError{errors.New(strings.Join(problems, "; "))}
			}
			return withStore(cmd, func(st store.Store) error {
				id := args[0]
				o, err := st.GetOrg(cmd.Context(), id)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("no organization %q", id)
				}
				if err != nil {
					return fmt.Errorf("update organization: %w", err)
				}
				if setLookup {
					if err := st.UpdateOrgLookup(cmd.Context(), id, l); err != nil {
						return fmt.Errorf("update organization: %w", err)
					}
				}
				if setZone || setCountry {
					r := o.Region
					if setZone {
						r.TimeZone = zone
					}
					if setCountry {
						r.Country = country
					}
					if err := st.UpdateOrgRegion(cmd.Context(), id, r); err != nil {
						return fmt.Errorf("update organization: %w", err)
					}
				}
				if setNeedsAnswer {
					cs, ok := st.(store.CallbackStore)
					if !ok {
						return errors.New("update organization: this database keeps no to-call-back list")
					}
					if err := cs.SetCallbackNeedsAnswer(cmd.Context(), id, needsAnswer); err != nil {
						return fmt.Errorf("update organization: %w", err)
					}
				}
				if setRetention {
					if err := st.UpdateOrgRetention(cmd.Context(), id, days); err != nil {
						return fmt.Errorf("update organization: %w", err)
					}
				}
				if o, err = st.GetOrg(cmd.Context(), id); err != nil {
					return fmt.Errorf("update organization: %w", err)
				}
				v := orgView(o)
				if setNeedsAnswer {
					v.CallbackNeedsAnswer = &needsAnswer
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				out := cmd.OutOrStdout()
				if setLookup {
					if v.Lookup == nil {
						fmt.Fprintf(out, "%s: caller lookup removed\n", o.ID)
					} else {
						tok, to := "none", "server default (lookup.timeout)"
						if v.Lookup.Token != "" {
							tok = v.Lookup.Token
						}
						if v.Lookup.Timeout != "" {
							to = v.Lookup.Timeout
						}
						fmt.Fprintf(out, "%s: caller lookup %s\n  token:   %s\n  timeout: %s\n", o.ID, v.Lookup.URL, tok, to)
					}
				}
				if setZone || setCountry {
					c := v.Country
					if c == "" {
						c = "none (only E.164 numbers and trailing digits match)"
					}
					fmt.Fprintf(out, "%s: time zone %s, country %s\n", o.ID, v.TimeZone, c)
				}
				if setNeedsAnswer {
					how := "any call placed to the number"
					if needsAnswer {
						how = "an answered call placed to the number"
					}
					fmt.Fprintf(out, "%s: a to-call-back item is settled by %s\n", o.ID, how)
				}
				if setRetention {
					if v.RetentionDays == nil {
						fmt.Fprintf(out, "%s: calls kept forever\n", o.ID)
					} else {
						fmt.Fprintf(out, "%s: calls kept %s after their last activity\n", o.ID, retentionText(v.RetentionDays))
					}
				}
				return nil
			})
		},
	}
	update.Flags().String("lookup-url", "", `the adapter's absolute http(s) URL; "" removes the lookup`)
	update.Flags().String("lookup-token", "", "bearer token sent to the adapter (stored; never printed in full)")
	update.Flags().String("lookup-timeout", "", "bound on one lookup, at most 10s (default: the server's lookup.timeout)")
	update.Flags().String("timezone", "", `IANA time zone such as Europe/London; "" for UTC`)
	update.Flags().String("country", "", `ISO 3166-1 alpha-2 code such as GB, for numbers searched in national form; "" for none`)
	update.Flags().Bool("callback-needs-answer", false, "a call placed to a number on the to-call-back list settles it only when answered (=false: any attempt)")
	update.Flags().String("retention-days", "", `days calls are kept after their last activity, 1 to 36500; "forever" keeps them forever`)
	outputFlag(update)

	orgs.AddCommand(create, list, update)
	return orgs
}

type keyJSON struct {
	ClientID     string     `json:"clientId"`
	ClientSecret string     `json:"clientSecret,omitempty"`
	SecretLast8  string     `json:"secretLast8,omitempty"`
	OrgID        *string    `json:"orgId"`
	Scopes       []string   `json:"scopes"`
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	RotatedAt    *time.Time `json:"rotatedAt,omitempty"`
	Status       string     `json:"status,omitempty"`
}

func keyView(k store.Key, now time.Time) keyJSON {
	v := keyJSON{ClientID: k.ClientID, SecretLast8: k.SecretLast8, Scopes: k.Scopes, CreatedAt: k.CreatedAt.UTC(),
		ExpiresAt: utcPtr(k.ExpiresAt), RevokedAt: utcPtr(k.RevokedAt), RotatedAt: utcPtr(k.RotatedAt), Status: "active"}
	if k.OrgID != "" {
		org := k.OrgID
		v.OrgID = &org
	}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	switch {
	case k.RevokedAt != nil:
		v.Status = "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		v.Status = "expired"
	}
	return v
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func newKeys() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage API keys"}

	create := &cobra.Command{
		Use:   "create (--org ORG_ID | --operator) --scope SCOPE [--scope SCOPE ...]",
		Short: "Create a key and print its Client ID and secret, once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			org, _ := cmd.Flags().GetString("org")
			operator, _ := cmd.Flags().GetBool("operator")
			scopes, _ := cmd.Flags().GetStringArray("scope")
			expires, _ := cmd.Flags().GetString("expires-at")
			var problems []string
			switch {
			case operator && org != "":
				problems = append(problems, "--operator and --org exclude each other: an operator key is not locked to an organization")
			case !operator && org == "":
				problems = append(problems, "--org is required (or --operator for a key not locked to any organization)")
			}
			if len(scopes) == 0 {
				problems = append(problems, "at least one --scope is required, for example --scope org.calls.events")
			}
			seen := map[string]bool{}
			var uniq []string
			for _, s := range scopes {
				if err := auth.ValidScope(s); err != nil {
					problems = append(problems, err.Error())
				}
				if !seen[s] {
					seen[s] = true
					uniq = append(uniq, s)
				}
			}
			var expiresAt *time.Time
			now := time.Now().UTC()
			if expires != "" {
				t, err := time.Parse(time.RFC3339, expires)
				switch {
				case err != nil:
					problems = append(problems, "--expires-at must be an RFC 3339 time such as 2027-01-01T00:00:00Z")
				case !t.After(now):
					problems = append(problems, "--expires-at must be in the future")
				default:
					t = t.UTC()
					expiresAt = &t
				}
			}
			if len(problems) > 0 {
				return usageError{errors.New(strings.Join(problems, "; "))}
			}
			return withStore(cmd, func(st store.Store) error {
				cred := auth.NewCredential()
				k := store.Key{ClientID: cred.ClientID, OrgID: org, Scopes: uniq, SecretHash: cred.SecretHash,
					SecretLast8: cred.SecretLast8, CreatedAt: now, ExpiresAt: expiresAt}
				if err := st.CreateKey(cmd.Context(), k); err != nil {
					if errors.Is(err, store.ErrNotFound) {
						return fmt.Errorf("create key: no organization %q", org)
					}
					return fmt.Errorf("create key: %w", err)
				}
				v := keyView(k, now)
				v.ClientSecret = cred.Secret
				v.SecretLast8 = ""
				v.Status = ""
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "Client ID:     %s\nClient Secret: %s\n", v.ClientID, v.ClientSecret)
				fmt.Fprintln(cmd.ErrOrStderr(), "The secret is shown only now and cannot be recovered; store it safely.")
				return nil
			})
		},
	}
	create.Flags().String("org", "", "organization the key is federated to")
	create.Flags().StringArray("scope", nil, "scope the key holds (repeatable): org.calls.events, org.calls.events.<type>, org.popups.read, org.calls.read, org.callbacks.write")
	create.Flags().String("expires-at", "", "when the key stops working (RFC 3339); default never")
	create.Flags().Bool("operator", false, "make an operator key, not locked to any organization")
	outputFlag(create)

	list := &cobra.Command{
		Use:   "list (--org ORG_ID | --operator)",
		Short: "List keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			org, _ := cmd.Flags().GetString("org")
			operator, _ := cmd.Flags().GetBool("operator")
			if (org == "") == !operator {
				return usageError{errors.New("give exactly one of --org ORG_ID or --operator")}
			}
			return withStore(cmd, func(st store.Store) error {
				if org != "" {
					if _, err := st.GetOrg(cmd.Context(), org); err != nil {
						if errors.Is(err, store.ErrNotFound) {
							return fmt.Errorf("no organization %q", org)
						}
						return err
					}
				}
				list, err := st.ListKeys(cmd.Context(), org)
				if err != nil {
					return fmt.Errorf("list keys: %w", err)
				}
				now := time.Now()
				out := make([]keyJSON, len(list))
				for i, k := range list {
					out[i] = keyView(k, now)
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CLIENT ID\tSECRET\tSTATUS\tSCOPES\tEXPIRES")
				for _, k := range out {
					exp := "never"
					if k.ExpiresAt != nil {
						exp = k.ExpiresAt.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t…%s\t%s\t%s\t%s\n", k.ClientID, k.SecretLast8, k.Status, strings.Join(k.Scopes, ","), exp)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().String("org", "", "organization whose keys to list")
	list.Flags().Bool("operator", false, "list operator keys instead")
	outputFlag(list)

	revoke := &cobra.Command{
		Use:   "revoke CLIENT_ID",
		Short: "Revoke a key; it stops working at once",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(st store.Store) error {
				if err := st.RevokeKey(cmd.Context(), args[0], time.Now().UTC()); err != nil {
					if errors.Is(err, store.ErrNotFound) {
						return fmt.Errorf("no key %q", args[0])
					}
					return fmt.Errorf("revoke key: %w", err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "revoked", args[0])
				return nil
			})
		},
	}

	rotate := &cobra.Command{
		Use:   "rotate CLIENT_ID",
		Short: "Give a key a new secret; the old secret stops working at once",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			return withStore(cmd, func(st store.Store) error {
				k, err := st.KeyByClientID(cmd.Context(), args[0])
				if err != nil {
					if errors.Is(err, store.ErrNotFound) {
						return fmt.Errorf("no key %q", args[0])
					}
					return fmt.Errorf("rotate key: %w", err)
				}
				if k.RevokedAt != nil {
					return fmt.Errorf("key %q is revoked; create a new key instead", args[0])
				}
				secret := auth.NewSecret()
				now := time.Now().UTC()
				if err := st.RotateKey(cmd.Context(), k.ClientID, auth.HashSecret(secret), auth.SecretLast8(secret), now); err != nil {
					return fmt.Errorf("rotate key: %w", err)
				}
				k.RotatedAt = &now
				v := keyView(k, now)
				v.ClientSecret = secret
				v.SecretLast8 = ""
				v.Status = ""
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Client ID:     %s\nClient Secret: %s\n", v.ClientID, v.ClientSecret)
				fmt.Fprintln(cmd.ErrOrStderr(), "The old secret no longer works. The new one is shown only now; store it safely.")
				return nil
			})
		},
	}
	outputFlag(rotate)

	keys.AddCommand(create, list, revoke, rotate)
	return keys
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d", cmd.Name(), n, len(args))}
		}
		return nil
	}
}

// memoryLimitText is a soft memory limit as the start-up log shows it.
func memoryLimitText(limit int64) string {
	if limit == math.MaxInt64 {
		return "none"
	}
	return strconv.FormatInt(limit>>20, 10) + " MiB"
}
