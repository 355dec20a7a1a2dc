package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"ctrperf/internal/exitcode"
)

// exitCodesHelp is the table of exit statuses in `ctrperf --help`.
const exitCodesHelp = `Exit status:
  0    success
  1    failure (a target unreachable, a plan with problems, a failed write, a
       bench run whose runs all failed or whose baseline never succeeded, ...)
  2    usage: unknown command or flag, bad flag value, wrong arguments
  3    a threshold was broken: the results were measured and written, but one
       is worse than the bound asked for (load: the open-loop rate fell short)
  130  interrupted (SIGINT, SIGTERM, SIGHUP) after cleaning up`

// exitStatus prints err (if any) and returns the process's exit status: the
// one place errors become statuses (exitcode.Of). cmd is the command that
// ran, for the hint after a usage error.
func exitStatus(cmd *cobra.Command, err error, stderr io.Writer) int {
	code := exitcode.Of(err)
	if err == nil {
		return code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "ctrperf:", msg)
	}
	if code == exitcode.Usage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// applyConventions makes every command of the tree under root follow the
// same rules, so that a command added later needs nothing of its own:
//
//   - a bad flag (unknown, or a value that does not parse) is a usage
//     error (exit 2), through the FlagErrorFunc subcommands inherit;
//   - a wrong number of arguments (the command's Args validator) and a
//     missing required flag or broken flag group are usage errors;
//   - a command that only groups subcommands prints its help when called
//     alone and refuses an unknown subcommand with a usage error (cobra
//     would print the help and exit 0).
//
// It must run after every command has been added (it adds cobra's help and
// completion commands first, so they follow the rules too).
func applyConventions(root *cobra.Command) {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.AsUsage(err) })
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictHelp(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		if !c.Runnable() && c.HasSubCommands() {
			c.Args = unknownSubcommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error { return exitcode.AsUsage(args(c, a)) }
		}
		if c.Runnable() {
			checkFlagsFirst(c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// strictHelp makes `ctrperf help TOPIC` a usage error (exit 2, with the
// closest command) when TOPIC is no command: cobra's help prints "Unknown
// help topic" and the root's usage, then exits 0.
func strictHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "help" {
			continue
		}
		run := c.Run
		c.Run = nil
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				target, rest, err := c.Root().Find(args)
				if err != nil || target == nil || len(rest) > 0 || target == c.Root() {
					msg := fmt.Sprintf("unknown help topic %q", strings.Join(args, " "))
					if s := c.Root().SuggestionsFor(args[0]); len(s) > 0 {
						msg += "; did you mean " + strings.Join(s, " or ") + "?"
					}
					return exitcode.AsUsage(errors.New(msg))
				}
			}
			run(c, args)
			return nil
		}
	}
}

// checkFlagsFirst runs cobra's required-flag and flag-group checks in
// PreRunE, before cobra runs them itself, so that their errors are usage
// errors; then the command's own PreRunE or PreRun.
func checkFlagsFirst(c *cobra.Command) {
	preE, pre := c.PreRunE, c.PreRun
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return exitcode.AsUsage(err)
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return exitcode.AsUsage(err)
		}
		switch {
		case preE != nil:
			return preE(cmd, args)
		case pre != nil:
			pre(cmd, args)
		}
		return nil
	}
	c.PreRun = nil
}

// unknownSubcommand is the Args of a command that only groups others: any
// argument is a command it does not have.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(names) > 0 {
		msg += " (commands: " + strings.Join(names, ", ") + ")"
	}
	return exitcode.AsUsage(errors.New(msg))
}
