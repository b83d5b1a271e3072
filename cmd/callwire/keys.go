package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

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
