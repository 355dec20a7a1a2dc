package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"ctrperf/internal/version"
)

// The output formats. Every command that prints results takes --format
// with at least table and json; md and csv where the result is a table.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatMD    = "md"
	formatCSV   = "csv"
)

// formatDescriptions are shown by shell completion of --format.
var formatDescriptions = map[string]string{
	formatTable: "aligned columns for a terminal",
	formatJSON:  "JSON with schema_version and ctrperf_version",
	formatMD:    "Markdown tables",
	formatCSV:   "comma-separated values, one header line",
	"html":      "one self-contained HTML file with plots",
	"summary":   "the short form bench run prints at its end",
}

// jsonSchemaVersion is the version of the layout of ctrperf's JSON outputs
// (every --format json, --json). It changes when a field changes meaning or
// disappears; new fields do not change it.
const jsonSchemaVersion = 1

// outputFormat is the --format flag of one command with --json as its
// alias. Both are checked while the flags are parsed, so a bad value or
// a contradiction (--json --format md) is a usage error before anything runs.
type outputFormat struct {
	value     string
	allowed   []string
	formatSet bool // --format given
	jsonSet   bool // --json given (true)
}

// addFormatFlags adds --format (default table) and --json to cmd, with
// completion of the formats. allowed lists the formats, table first.
func addFormatFlags(cmd *cobra.Command, allowed ...string) *outputFormat {
	o := &outputFormat{value: allowed[0], allowed: allowed}
	fl := cmd.Flags()
	fl.Var((*formatValue)(o), "format", "output format: "+strings.Join(allowed, ", "))
	jf := fl.VarPF((*jsonAlias)(o), "json", "", "same as --format json")
	jf.NoOptDefVal = "true"
	_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var c []cobra.Completion
		for _, f := range allowed {
			c = append(c, cobra.CompletionWithDesc(f, formatDescriptions[f]))
		}
		return c, cobra.ShellCompDirectiveNoFileComp
	})
	return o
}

// String is the chosen format.
func (o *outputFormat) String() string { return o.value }

// JSON reports whether the output is JSON.
func (o *outputFormat) JSON() bool { return o.value == formatJSON }

// formatValue is the pflag.Value of --format.
type formatValue outputFormat

func (v *formatValue) String() string { return v.value }
func (v *formatValue) Type() string   { return "format" }
func (v *formatValue) Set(s string) error {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "markdown" && slices.Contains(v.allowed, formatMD) {
		s = formatMD
	}
	if !slices.Contains(v.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.allowed, ", "))
	}
	if v.jsonSet && s != formatJSON {
		return fmt.Errorf("--json means --format json; it contradicts --format %s", s)
	}
	v.value, v.formatSet = s, true
	return nil
}

// jsonAlias is the pflag.Value of --json.
type jsonAlias outputFormat

func (v *jsonAlias) String() string   { return fmt.Sprint(v.jsonSet) }
func (v *jsonAlias) Type() string     { return "bool" }
func (v *jsonAlias) IsBoolFlag() bool { return true }
func (v *jsonAlias) Set(s string) error {
	on, err := parseBool(s)
	if err != nil {
		return err
	}
	if !on {
		return nil
	}
	if v.formatSet && v.value != formatJSON {
		return fmt.Errorf("--json means --format json; it contradicts --format %s", v.value)
	}
	v.value, v.jsonSet = formatJSON, true
	return nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "t", "true":
		return true, nil
	case "0", "f", "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}

// writeJSON writes v as indented JSON with schema_version and
// ctrperf_version first. v must encode as a JSON object.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return writeJSONBytes(w, b)
}

// writeJSONBytes writes an encoded JSON object, indented, with
// schema_version and ctrperf_version first (unless it has them already).
func writeJSONBytes(w io.Writer, b []byte) error {
	b, err := withVersions(b)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("indent JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// writeJSONLine writes v as one line of JSON (JSON lines) with
// schema_version and ctrperf_version first.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	if b, err = withVersions(b); err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// withVersions puts schema_version and ctrperf_version at the front of the
// encoded object b, keeping the order of its own fields.
func withVersions(b []byte) ([]byte, error) {
	b = bytes.TrimSpace(b)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, errors.New("JSON output is not an object (a bug): " + err.Error())
	}
	if _, ok := top["schema_version"]; ok {
		return b, nil
	}
	ver, _ := json.Marshal(version.Version)
	head := fmt.Sprintf(`{"schema_version":%d,"ctrperf_version":%s`, jsonSchemaVersion, ver)
	rest := bytes.TrimSpace(b[1:])
	if len(rest) > 0 && rest[0] != '}' {
		head += ","
	}
	return append([]byte(head), rest...), nil
}

// table is a result as rows of cells, rendered as aligned columns, a
// Markdown table or CSV.
type table struct {
	header []string
	rows   [][]string
	// alignRight right-aligns the columns of the text form (numbers).
	alignRight bool
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write renders t in format (table, md or csv).
func (t *table) write(w io.Writer, format string) error {
	switch format {
	case formatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(t.header); err != nil {
			return err
		}
		if err := cw.WriteAll(t.rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	case formatMD:
		esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
		line := func(cells []string) string {
			var out []string
			for _, c := range cells {
				out = append(out, esc(c))
			}
			return "| " + strings.Join(out, " | ") + " |\n"
		}
		var sb strings.Builder
		sb.WriteString(line(t.header))
		sep := make([]string, len(t.header))
		for i := range sep {
			sep[i] = "---"
		}
		sb.WriteString("|" + strings.Join(sep, "|") + "|\n")
		for _, r := range t.rows {
			sb.WriteString(line(r))
		}
		_, err := io.WriteString(w, sb.String())
		return err
	default:
		var flags uint
		// Right-aligned columns need every cell tab-terminated; left-aligned
		// ones leave the last cell open, so lines carry no trailing blanks.
		end := ""
		if t.alignRight {
			flags, end = tabwriter.AlignRight, "\t"
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', flags)
		fmt.Fprintln(tw, strings.Join(t.header, "\t")+end)
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+end)
		}
		return tw.Flush()
	}
}
