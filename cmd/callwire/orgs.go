package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/store"
)

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
