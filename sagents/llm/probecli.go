package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
)

// ProbeCommandOptions are the flags of `sage probe`.
type ProbeCommandOptions struct {
	BaseURL    string // --base-url
	Model      string // --model
	APIKey     string // e.g. from $OPENAI_API_KEY; may be comma-separated
	JSON       bool   // --json: print the report as JSON
	Refresh    bool   // ignore the cache
	HTTPClient *http.Client
	Probe      ProbeOptions
}

// RunProbeCommand probes one model and prints the table (or JSON) to w. The
// report is printed even when the connection probe fails; the error is
// returned for the exit status.
func RunProbeCommand(ctx context.Context, w io.Writer, o ProbeCommandOptions) error {
	switch {
	case o.BaseURL == "":
		return &ConfigError{Field: "--base-url", Reason: "required"}
	case o.Model == "":
		return &ConfigError{Field: "--model", Reason: "required"}
	}
	c, err := New(Config{
		Standard:   ModelConfig{BaseURL: o.BaseURL, APIKey: o.APIKey, Model: o.Model},
		HTTPClient: o.HTTPClient,
	})
	if err != nil {
		return err
	}
	popts := o.Probe
	popts.Refresh = popts.Refresh || o.Refresh
	rep, perr := c.ProbeModel(ctx, popts)
	if rep == nil {
		return perr
	}
	if o.JSON {
		err = rep.WriteJSON(w)
	} else {
		err = rep.WriteTable(w)
	}
	if perr != nil {
		return perr
	}
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *ProbeReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("llm: writing probe report: %w", err)
	}
	return nil
}

// WriteTable writes the report as an aligned text table.
func (r *ProbeReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cached := "no"
	if r.Cached {
		cached = "yes"
	}
	fmt.Fprintf(tw, "base url\t%s\nmodel\t%s\nchecked\t%s (cached: %s)\n\n",
		r.BaseURL, r.Model, r.CheckedAt.Format("2006-01-02 15:04:05Z07:00"), cached)
	fmt.Fprintln(tw, "CAPABILITY\tRESULT\tLATENCY\tDETAIL")
	seen := map[string]bool{}
	for _, p := range r.Probes {
		seen[p.Name] = true
		result := p.Result.String()
		if p.Failed != "" {
			result = "failed (" + p.Failed + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%dms\t%s\n", p.Name, result, p.LatencyMS, oneLine(clip(p.Detail)))
	}
	// The prompt-cache fields are not probed: the provider table answers.
	table := r.Capabilities.merge(cacheDefaults(r.BaseURL, r.Model))
	rest := []struct {
		name, detail string
		s            Support
	}{{"tools", "not probed", r.Capabilities.Tools}, {"reasoning_effort", "not probed", r.Capabilities.ReasoningEffort},
		{paramCacheControl, "provider table", table.CacheControl}, {paramPromptCacheKey, "provider table", table.PromptCacheKey}}
	for _, x := range rest {
		if !seen[x.name] {
			fmt.Fprintf(tw, "%s\t%s\t-\t%s\n", x.name, x.s, x.detail)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("llm: writing probe report: %w", err)
	}
	return nil
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' || c == '\t' {
			b[i] = ' '
		}
	}
	return string(b)
}
