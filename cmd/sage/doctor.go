package main

import (
	"context"
	"encoding/json"

	"github.com/sage-go/sage/internal/doctor"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

func init() {
	register(command{"doctor", "check what this machine supports and how to fix what is missing", runDoctor})
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet("sage doctor", "sage doctor [--json]")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, stop := parseFlags(env, fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(env, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	r := doctor.Run(ctx, doctor.Env{})
	r.Checks = append(r.Checks, doctor.Check{Name: "local defaults", Status: doctor.OK, Detail: local.DefaultsSummary()})
	var err error
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			doctor.Report
			OK bool `json:"ok"`
		}{r, r.OK()})
	} else {
		err = r.Print(env.stdout)
	}
	if err != nil {
		return fail(env, 1, err)
	}
	if !r.OK() {
		return 1
	}
	return 0
}
