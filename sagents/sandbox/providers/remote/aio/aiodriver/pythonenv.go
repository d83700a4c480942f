package aiodriver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// VenvPath is where ExecutePython's virtual environment lives inside the
// sandbox (as in the local provider). It is made on the first call with
// requirements and used by every later call.
const VenvPath = "/opt/sage-venv"

// PipTimeout bounds the venv creation and pip install of one call.
const PipTimeout = 5 * time.Minute

// pythonExec runs the program on fd 3 with the venv's python when the
// venv exists, else with python3 on PATH.
const pythonExec = "if [ -x " + VenvPath + "/bin/python3 ]; then exec " + VenvPath + "/bin/python3 /dev/fd/3; fi; exec python3 /dev/fd/3"

// pipSettings pass from the caller's environment to pip, as in the local
// provider (PIP_FIND_LINKS names a host directory, so it does not).
var pipSettings = []string{"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_TRUSTED_HOST"}

// installRequirements makes the venv (once, under a lock in the sandbox)
// and pip-installs the requirements into it. Each requirement reaches
// pip as its own argument through the environment, never inside the
// command text. pip's settings come from opts.Env, the provider's
// environment, else this process's environment.
func (h *Handle) installRequirements(ctx context.Context, opts driver.PythonOptions) (*driver.CommandResult, error) {
	env := map[string]string{}
	args := make([]string, 0, len(opts.Requirements))
	for i, r := range opts.Requirements {
		if r == "" || strings.HasPrefix(r, "-") || strings.ContainsAny(r, "\n\r\x00") {
			return nil, fmt.Errorf("aio: requirement %q: want a pip requirement specifier such as requests>=2, not an option", r)
		}
		k := "SAGE_REQ_" + strconv.Itoa(i)
		env[k] = r
		args = append(args, `"$`+k+`"`)
	}
	given := mergeEnv(h.env, opts.Env)
	for k, v := range given {
		env[k] = v
	}
	for _, k := range pipSettings {
		if _, ok := given[k]; !ok {
			if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
	}
	defer opts.Step("installing the Python requirements")()
	cmd := "exec 9>/tmp/.sage-venv.lock && flock 9 && " +
		"{ [ -x " + VenvPath + "/bin/python3 ] || { rm -rf " + VenvPath + " && python3 -m venv " + VenvPath + " >&2; }; } && " +
		"exec " + VenvPath + "/bin/python3 -m pip install --disable-pip-version-check --no-input --timeout 15 --retries 1 -- " +
		strings.Join(args, " ")
	res, err := h.Exec(ctx, driver.ExecSpec{Command: cmd, ExecOptions: driver.ExecOptions{
		Env: env, Workdir: opts.Workdir, Timeout: PipTimeout}})
	if err != nil {
		return res, fmt.Errorf("aio: pip install: %w", err)
	}
	if !res.Success {
		re := &driver.RequirementsError{Mode: "aio", Requirements: opts.Requirements, Result: res}
		if msg := re.PipError(); strings.Contains(msg, "No module named") &&
			(strings.Contains(msg, "venv") || strings.Contains(msg, "ensurepip") || strings.Contains(msg, "pip")) {
			re.Fix = "use the full sandbox image, `make image`, which has python3-venv and pip"
		}
		return res, re
	}
	return res, nil
}
