// Command tofuc compiles TDL: it checks and formats .tdl files, evaluates
// operators and models with the reference interpreter, and (in later
// stages) partitions, rewrites and lowers them. `tofuc help` lists the
// commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"tofuc/codegen/toolchain"
	"tofuc/lang/suggest"
	"tofuc/pipeline"
)

// Exit statuses (docs/cli.md).
const (
	exitOK    = 0
	exitUser  = 1 // an error in the user's input, or a failed check
	exitUsage = 2 // a usage error
)

type command struct {
	name    string
	summary string
	usage   string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands map[string]*command

func init() {
	commands = map[string]*command{}
	for _, c := range []*command{
		{"check", "parse and check TDL files", "tofuc check [--json] [--model NAME] [--set NAME=VALUE]... [--train [--loss L] [--optimizer O]] [--summary] FILE...", runCheck},
		{"fmt", "format TDL files canonically", "tofuc fmt [-w | -l | -d] FILE...", runFmt},
		{"grad", "print the backward operators derived from an operator, as TDL", "tofuc grad FILE --op NAME", runGrad},
		{"eval", "evaluate an operator or a model (interpreter or compiled backends)", "tofuc eval FILE [--model NAME | --op NAME] [--set NAME=VALUE]... [--attr NAME=VALUE]... --in NAME=PATH.npy ... [--params PATH.npz] [--seed N] [--backend interp|cpu|simt] [--train --steps N [--loss L] [--optimizer O] [--lr X]] --out DIR", runEval},
		{"train", "train a model on a dataset: epochs of shuffled mini-batches, held-out evaluation, checkpoints", "tofuc train MODEL --data NAME=PATH.npy ... --out DIR [--epochs N] [--holdout F] [--set batch=N]... [--loss L] [--optimizer O] [--lr X] [--backend cpu|interp|simt] [--resume CHECKPOINT]", runTrain},
		{"partition", "split a model over devices with the least communication, and report it", "tofuc partition MODEL [--train] --devices N [--report DIR [--memory-tradeoff]] [--memory BYTES] [--strategy FILE] [--factors K1,K2,...] [--set NAME=VALUE]...", runPartition},
		{"strategies", "list the partition-n-reduce strategies of operators", "tofuc strategies [--op NAME] [--json] FILE...", runStrategies},
		{"import", "import an ONNX model as TDL, with its weights in an .npz", "tofuc import MODEL.onnx [-o OUT.tdl] [--known NAME=PATH]...", runImport},
		{"compile", "compile a model to kernels (PTX and host code) and a launch plan", "tofuc compile MODEL [--train] [--devices N] -o DIR [--emit llvm,ptx,host,simt,plan,report] [--set NAME=VALUE]...", runCompile},
		{"bench", "time a model on a backend, whole and kernel by kernel", "tofuc bench MODEL [--backend interp|cpu|simt] [--runs N] [--threads T] [--json] [--set NAME=VALUE]...", runBench},
		{"run", "run a compiled plan on the host runtime or the SIMT emulator", "tofuc run DIR [--backend cpu|simt] --in NAME=PATH.npy ... [--params PATH.npz] --out DIR2", runRun},
		{"onnx-test", "run ONNX conformance tests", "tofuc onnx-test [--json] [--backend interp|cpu|simt] [--timeout D] [--jobs N] [--explain] PATH...", runONNXTest},
		{"optimize", "rewrite a model with the verified rules to lower its estimated cost", "tofuc optimize MODEL.tdl [-o OUT.tdl] [--report DIR] [--model NAME] [--set NAME=VALUE]... [--alpha A] [--max-graphs N]", runOptimize},
		{"rules", "generate rewrite rules by enumerating small graphs, and verify them", "tofuc rules generate [-o FILE] [--max-ops N] [--worlds dense,conv] [--seed N] [--timeout D]", runRules},
		{"verify", "prove rewrite rules equal from their TDL, or refute them", "tofuc verify [--json] [--timeout D] [--max-shapes N] FILE...", runVerify},
		{"version", "print tofuc's version and the tools it finds", "tofuc version", runVersion},
		{"help", "show help for tofuc or one command", "tofuc help [COMMAND]", runHelp},
	} {
		commands[c.name] = c
	}
}

func main() {
	// A compile allocates much and keeps little: collecting at five times
	// the live heap, not twice, took about a second off a 14 s cold
	// compile of ResNet-50 for a fifth more memory. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	toolchain.Warnings = stderr // a damaged cache entry is said, in one line
	defer toolchain.FlushWarnings()
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "--help":
		printUsage(stdout)
		return exitOK
	case "-v", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "tofuc: unknown command %q\n", name)
		if s := suggestCommand(name); s != "" {
			fmt.Fprintf(stderr, "Did you mean %q?\n", s)
		}
		fmt.Fprintln(stderr, "Run 'tofuc help' for the list of commands.")
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "tofuc compiles TDL, a tensor description language.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: tofuc COMMAND [ARGUMENTS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'tofuc help COMMAND' for a command's flags.")
}

func suggestCommand(name string) string {
	for n := range commands {
		if strings.HasPrefix(n, name) || strings.HasPrefix(name, n) {
			return n
		}
	}
	return ""
}

func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tofuc help: unknown command %q\n", args[0])
		return exitUsage
	}
	// `tofuc help rules generate` is `tofuc rules generate --help`
	return c.run(append(args[1:len(args):len(args)], "--help"), stdout, stderr)
}

// flagSet makes a flag set whose errors and --help follow tofuc's
// conventions. name is the command, or a command and its subcommand
// ("rules generate").
func flagSet(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.Usage = func() {} // parseFlags prints the help, on stdout
	return fs
}

// parseFlags parses args; it returns done with the exit status when the
// command should stop: a usage error (on stderr), or --help (the command's
// help on stdout, so that it pipes into a pager).
func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) (status int, done bool) {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		cmd := commands[strings.Fields(fs.Name())[0]]
		fmt.Fprintf(stdout, "%s: %s\n\nUsage: %s\n\nFlags:\n%s", fs.Name(), cmd.summary, cmd.usage, fs.FlagUsages())
		return exitOK, true
	}
	if err != nil {
		fmt.Fprintf(fs.Output(), "tofuc %s: %s\n", fs.Name(), flagError(fs, err))
		fmt.Fprintf(fs.Output(), "Run 'tofuc help %s' for usage.\n", fs.Name())
		return exitUsage, true
	}
	return exitOK, false
}

// flagError words pflag's parse error err for a user: an unknown flag
// with the closest one fs has, a value that is not of its flag's
// built-in type with what the flag takes (pflag quotes Go's strconv
// error); tofuc's own flag types word their errors themselves.
func flagError(fs *pflag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		return msg + strings.Replace(suggest.DidYouMean(name, names), "mean ", "mean --", 1)
	}
	var value, name string
	if _, scanErr := fmt.Sscanf(msg, "invalid argument %q for %q flag:", &value, &name); scanErr == nil {
		// pflag names a flag with a shorthand "-w, --write".
		if _, long, ok := strings.Cut(name, "--"); ok {
			name = long
		}
		if f := fs.Lookup(name); f != nil {
			if takes := flagTakes(f.Value.Type(), msg); takes != "" {
				return fmt.Sprintf("--%s %s: %s", f.Name, value, takes)
			}
		}
	}
	return msg
}

// flagTakes says what a flag of a built-in pflag value type takes, given
// the parse error msg ("" for the other types).
func flagTakes(typ, msg string) string {
	var takes string
	switch typ {
	case "uint", "uint8", "uint16", "uint32", "uint64":
		takes = "a whole number, 0 or more"
	case "int", "int8", "int16", "int32", "int64":
		takes = "a whole number"
	case "float32", "float64":
		takes = "a number"
	case "bool":
		return "expected true or false"
	case "duration":
		return "expected a duration like 90s or 5m"
	default:
		return ""
	}
	if strings.Contains(msg, "value out of range") {
		return "out of range for " + typ
	}
	return "expected " + takes
}

// count writes n and the noun, plural unless n is 1: "1 parameter",
// "3 parameters".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkThreads refuses a --threads below 0 or above the most tofuc
// starts (pipeline.CheckThreads).
func checkThreads(n int) error { return pipeline.CheckThreads(n) }

func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "tofuc %s: %s\n", cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "Run 'tofuc help %s' for usage.\n", cmd)
	return exitUsage
}
