package main

import (
	"context"
	"encoding/json"
	"flag"

	"github.com/sage-go/sage/internal/doctor"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

func init() {
	register(command{"doctor", "check what this machine supports and how to fix what is missing", runDoctor})
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sage doctor", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
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
