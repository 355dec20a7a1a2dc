package main

// What makes ctrperf a tool people install: --version, the built-in plans
// (`ctrperf plans`), the programs ctrperf deploys as hidden commands of the
// binary itself (`ctrperf __ticketd`), the man page generator the Makefile
// calls (`ctrperf __man DIR`) and shell completion of flag values.

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"ctrperf/internal/bench"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/isolate"
	"ctrperf/internal/plan"
	"ctrperf/internal/report"
	"ctrperf/internal/selfbin"
	"ctrperf/internal/version"
	"ctrperf/plans"
	"ctrperf/workloads/ticketd"
)

// addShipping adds --version, `plans`, the hidden commands and the
// completion of flag values to the finished command tree.
func addShipping(root *cobra.Command) {
	root.Version = version.Get().Version
	root.SetVersionTemplate(version.Get().String() + "\n")
	root.AddCommand(newPlansCmd(), newTicketdCmd(), newIdleCmd(), newPauseCmd(), newVMInitCmd(), newManCmd())
	registerCompletions(root)
}

// openPlan reads the plan a command names (a built-in plan by name, a file by path)
// and says on stderr which one it used.
func openPlan(cmd *cobra.Command, arg string, opt plan.Options) (*plan.Plan, error) {
	p, src, err := bench.OpenPlan(arg, opt)
	if src.Builtin != "" || src.Shadows {
		fmt.Fprintf(cmd.ErrOrStderr(), "using the %s\n", src)
	}
	return p, err
}

func newPlansCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plans",
		Short: "List and print the plans built into ctrperf",
		Long: `The plans of ctrperf's repository (plans/*.yaml) are built into the binary,
so 'ctrperf bench run smoke' works from any directory. A bare name on the
command line ("smoke") is always the built-in plan, never a file of the
working directory; a plan file is named as a path, with a slash or a
.yaml/.yml suffix ("./smoke", "mine.yaml"), and a path that does not exist
but names a built-in plan ("smoke.yaml", "plans/smoke.yaml") is that plan.
To change one, 'ctrperf plans show NAME > mine.yaml', edit, and run
'ctrperf bench run mine.yaml'. Packages also install them under
share/ctrperf/plans.`,
	}
	var format *outputFormat
	list := &cobra.Command{
		Use:   "list",
		Short: "Built-in plans: name, workload, configurations, description",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type row struct {
				Name           string `json:"name"`
				Workload       string `json:"workload,omitempty"`
				Configurations int    `json:"configurations"`
				Description    string `json:"description,omitempty"`
				Error          string `json:"error,omitempty"`
			}
			var rows []row
			var bad []string
			for _, name := range plans.Names() {
				b, _ := plans.Read(name)
				p, err := bench.ParsePlan("built-in:"+plans.FileName(name), b, plan.Options{})
				if err != nil {
					rows = append(rows, row{Name: name, Error: firstLine(err.Error())})
					bad = append(bad, name)
					continue
				}
				rows = append(rows, row{Name: name, Workload: p.Workload, Configurations: len(p.Configurations), Description: firstLine(p.Description)})
			}
			var err error
			if format.JSON() {
				err = writeJSON(cmd.OutOrStdout(), map[string]any{"plans": rows})
			} else {
				t := &table{header: []string{"NAME", "WORKLOAD", "CONFIGS", "DESCRIPTION"}}
				for _, r := range rows {
					if r.Error != "" {
						t.add(r.Name, "?", "?", "invalid: "+r.Error)
						continue
					}
					t.add(r.Name, r.Workload, strconv.Itoa(r.Configurations), r.Description)
				}
				err = t.write(cmd.OutOrStdout(), format.String())
			}
			if err != nil {
				return err
			}
			if len(bad) > 0 {
				return fmt.Errorf("built-in plans that do not validate: %s", strings.Join(bad, ", "))
			}
			return nil
		},
	}
	format = addFormatFlags(list, formatTable, formatJSON, formatMD, formatCSV)
	show := &cobra.Command{
		Use:               "show NAME",
		Short:             "Print a built-in plan's YAML (to copy and edit)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeBuiltinPlans,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, ok := plans.Read(args[0])
			if !ok {
				return exitcode.Usagef("no built-in plan %q; there are: %s", args[0], strings.Join(plans.Names(), ", "))
			}
			_, err := cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// newTicketdCmd is ticketd, the web workload's server, inside ctrperf: the
// images carry this binary with `__ticketd` as their entrypoint and host
// runs execute it, so neither needs the source tree or a Go toolchain.
func newTicketdCmd() *cobra.Command {
	return &cobra.Command{
		Use:                selfbin.Ticketd + " [ticketd flags]",
		Short:              "Run ticketd, the web workload's server (what ctrperf deploys; --help lists its flags)",
		Hidden:             true,
		DisableFlagParsing: true, // ticketd's own flags, exit status 2 on bad ones
		RunE: func(_ *cobra.Command, args []string) error {
			if code := ticketd.Main(args); code != 0 {
				return &exitcode.Error{Code: code}
			}
			return nil
		},
	}
}

// newIdleCmd waits for SIGTERM or SIGINT: the main process of a container
// ctrperf only execs commands in (kv's `load.client: container`).
func newIdleCmd() *cobra.Command {
	return &cobra.Command{
		Use:    selfbin.Idle,
		Short:  "Wait for SIGTERM or SIGINT, then exit 0 (a container's main process while ctrperf execs in it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			<-ctx.Done()
			return nil
		},
	}
}

// newManCmd writes the man pages; `make install` and `make deb` call it.
func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__man DIR",
		Short:  "Write ctrperf's man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			return doc.GenManTree(root, &doc.GenManHeader{
				Title: "CTRPERF", Section: "1", Manual: "ctrperf manual",
				Source: "ctrperf " + version.Get().Version, Date: manDate(),
			}, args[0])
		},
	}
}

// manDate is the date the man pages carry: SOURCE_DATE_EPOCH, else the
// commit's date, so the pages of one commit are the same bytes.
func manDate() *time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			t := time.Unix(n, 0).UTC()
			return &t
		}
	}
	if t, err := time.Parse(time.RFC3339, version.Get().Date); err == nil {
		t = t.UTC()
		return &t
	}
	return nil // cobra's default: now
}

// registerCompletions completes plan names, --only configurations,
// --policy and --format values wherever those appear.
func registerCompletions(root *cobra.Command) {
	for _, path := range [][]string{{"bench", "run"}, {"bench", "validate"}} {
		c, _, err := root.Find(path)
		if err != nil || c == root {
			continue
		}
		if c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completePlanArg
		}
		registerFlagCompletion(c, "only", completeOnly)
	}
	if c, _, err := root.Find([]string{"clean"}); err == nil && c != root {
		registerFlagCompletion(c, "hosts", completePlanArg) // a plan; sut=…,load=… is typed
	}
	known := map[string][]string{
		"ctrperf report":  report.Formats,
		"ctrperf compare": report.CompareFormats,
	}
	var policies []string
	for _, p := range isolate.Policies {
		policies = append(policies, string(p))
	}
	walk(root, func(c *cobra.Command) {
		registerFlagCompletion(c, "policy", fixed(policies))
		if f := c.Flags().Lookup("format"); f != nil {
			values := known[c.CommandPath()]
			if values == nil {
				values = valuesFromUsage(f.Usage)
			}
			if len(values) > 0 {
				registerFlagCompletion(c, "format", fixed(values))
			}
		}
	})
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// registerFlagCompletion registers fn for c's own flag name, unless the
// flag is missing or already completed by its command.
func registerFlagCompletion(c *cobra.Command, name string, fn cobra.CompletionFunc) {
	if c.LocalFlags().Lookup(name) == nil {
		return
	}
	if _, ok := c.GetFlagCompletionFunc(name); ok {
		return
	}
	_ = c.RegisterFlagCompletionFunc(name, fn)
}

func fixed(values []string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// usageList matches a flag usage that starts by listing its values:
// "table, md or json" or "text or json: ...".
var usageList = regexp.MustCompile(`^([a-z0-9-]+(?:, [a-z0-9-]+)*(?:,? or [a-z0-9-]+))\b`)

// valuesFromUsage reads the values a --format flag's usage lists.
func valuesFromUsage(usage string) []string {
	m := usageList.FindStringSubmatch(usage)
	if m == nil {
		return nil
	}
	s := strings.ReplaceAll(m[1], ", or ", ", ")
	s = strings.ReplaceAll(s, " or ", ", ")
	return strings.Split(s, ", ")
}

func completeBuiltinPlans(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return plans.Names(), cobra.ShellCompDirectiveNoFileComp
}

// completePlanArg offers the built-in plans and the *.yaml files and
// directories where the word being typed points.
func completePlanArg(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	if !strings.ContainsRune(toComplete, '/') {
		for _, n := range plans.Names() {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
	}
	dir := filepath.Dir(toComplete + "x") // "plans/" -> "plans", "" -> "."
	entries, _ := os.ReadDir(dir)
	prefix := ""
	if strings.ContainsRune(toComplete, '/') {
		prefix = dir + "/"
	}
	directive := cobra.ShellCompDirectiveNoFileComp
	for _, e := range entries {
		name := prefix + e.Name()
		if !strings.HasPrefix(name, toComplete) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		switch {
		case e.IsDir():
			out = append(out, name+"/")
			directive |= cobra.ShellCompDirectiveNoSpace
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			out = append(out, name)
		}
	}
	return out, directive
}

// completeOnly offers the configurations of the plan on the command line
// (or of OUT/plan.yaml with --resume OUT), after those already typed.
func completeOnly(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var p *plan.Plan
	var err error
	if len(args) > 0 {
		p, _, err = bench.OpenPlan(args[0], plan.Options{})
	} else if f := cmd.Flags().Lookup("resume"); f != nil && f.Value.String() != "" {
		p, err = bench.LoadPlan(filepath.Join(f.Value.String(), bench.PlanFile), plan.Options{})
	} else {
		err = errors.New("no plan yet")
	}
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	done, word := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done, word = toComplete[:i+1], toComplete[i+1:]
	}
	typed := strings.Split(done, ",")
	if f := cmd.Flags().Lookup("only"); f != nil {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			typed = append(typed, sv.GetSlice()...)
		}
	}
	var out []string
	for _, c := range p.Configurations {
		if strings.HasPrefix(c.Name, word) && !slices.Contains(typed, c.Name) {
			out = append(out, done+c.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
