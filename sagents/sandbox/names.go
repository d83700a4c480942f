package sandbox

import "github.com/sage-go/sage/sagents/sandbox/driver"

// The values a user builds, passes and gets back are defined once, in
// package driver, where drivers see them too; these aliases give them
// their user's names. Only the types a caller writes (in a literal, a
// declaration or an errors.As target) are here; the rest (the optional
// capabilities, the driver toolkit) stay in driver.
type (
	// Type is the sandbox mode: Local, Remote or Passthrough.
	Type = driver.Type
	// Config describes a sandbox (see driver.Config for its fields).
	Config = driver.Config
	// LocalConfig holds the limits and isolation of local mode.
	LocalConfig = driver.LocalConfig
	// RemoteConfig selects and configures a remote provider.
	RemoteConfig = driver.RemoteConfig
	// Isolation picks the isolation technique per operating system.
	Isolation = driver.Isolation
	// NetworkMode says what network a sandboxed command gets.
	NetworkMode = driver.NetworkMode
	// VolumeMount maps a host directory into the sandbox.
	VolumeMount = driver.VolumeMount

	// ExecOptions tune one command.
	ExecOptions = driver.ExecOptions
	// PythonOptions tune one Python run.
	PythonOptions = driver.PythonOptions
	// WriteOptions tune WriteFile.
	WriteOptions = driver.WriteOptions
	// TreeOptions bound FileTree.
	TreeOptions = driver.TreeOptions
	// CopyOptions tune CopyFromHost.
	CopyOptions = driver.CopyOptions

	// CommandResult is the outcome of a command that ran.
	CommandResult = driver.CommandResult
	// FileInfo describes one file.
	FileInfo = driver.FileInfo
	// TreeNode is one entry of FileTree's answer.
	TreeNode = driver.TreeNode
	// CopyResult counts what CopyFromHost copied.
	CopyResult = driver.CopyResult
	// BackgroundTask is a command started by StartBackground.
	BackgroundTask = driver.BackgroundTask
	// BackgroundOutput is a slice of a background task's log.
	BackgroundOutput = driver.BackgroundOutput
	// BackgroundState is a background task's state.
	BackgroundState = driver.BackgroundState

	// CheckpointID names one checkpoint of a sandbox's files.
	CheckpointID = driver.CheckpointID
	// Checkpoint is one saved state of the workspace.
	Checkpoint = driver.Checkpoint
	// RollbackResult is what a rollback did to the processes (Restore).
	RollbackResult = driver.RollbackResult

	// ConfigError names the config field that is wrong.
	ConfigError = driver.ConfigError
	// RequirementsError is a failed pip install of ExecutePython.
	RequirementsError = driver.RequirementsError
)

// The modes.
const (
	Local       = driver.Local
	Remote      = driver.Remote
	Passthrough = driver.Passthrough
)

// The network modes of LocalConfig.Network.
const (
	NetworkOff       = driver.NetworkOff
	NetworkOpen      = driver.NetworkOpen
	NetworkAllowlist = driver.NetworkAllowlist
)

// The isolation techniques of Isolation.Linux and Isolation.Darwin.
const (
	IsolationAuto     = driver.IsolationAuto
	IsolationBwrap    = driver.IsolationBwrap
	IsolationSeatbelt = driver.IsolationSeatbelt
	IsolationGvisor   = driver.IsolationGvisor
	IsolationNone     = driver.IsolationNone
)

// The defaults of Config.Timeout, ExecOptions.OutputLimit and
// TreeOptions.MaxEntries.
const (
	DefaultTimeout     = driver.DefaultTimeout
	DefaultOutputLimit = driver.DefaultOutputLimit
	DefaultMaxEntries  = driver.DefaultMaxEntries
)

// The errors a Sandbox's methods return, for errors.Is; drivers return the
// same values (package driver documents each).
var (
	ErrUnsupported          = driver.ErrUnsupported
	ErrClosed               = driver.ErrClosed
	ErrIsolationUnavailable = driver.ErrIsolationUnavailable
	ErrUnknownTask          = driver.ErrUnknownTask
	ErrTooLong              = driver.ErrTooLong
	ErrEscape               = driver.ErrEscape
	ErrReadOnly             = driver.ErrReadOnly
	ErrBadPath              = driver.ErrBadPath
	ErrUnknownCheckpoint    = driver.ErrUnknownCheckpoint
	ErrCheckpointBusy       = driver.ErrCheckpointBusy
	ErrCommandRunning       = driver.ErrCommandRunning
	ErrUnknownTurn          = driver.ErrUnknownTurn
)
