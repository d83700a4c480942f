package aioapi

import "time"

// This file holds the JSON shapes of the AIO Sandbox API (OpenAPI v1.9.4),
// field for field. Optional request fields are omitted when empty so the
// server applies its documented defaults. The server package reuses them.

// Envelope is the {success, message, data, hint} wrapper of every JSON
// answer except GET /v1/sandbox (whose fields sit at the top level).
type Envelope[T any] struct {
	Success bool    `json:"success"`
	Message *string `json:"message"`
	Data    T       `json:"data"`
	Hint    *string `json:"hint"`
}

// SandboxContext is the answer of GET /v1/sandbox (SandboxResponse): the
// sandbox's home directory, workspace and version.
type SandboxContext struct {
	Success   bool          `json:"success"`
	Message   *string       `json:"message"`
	Data      *string       `json:"data"`
	Hint      *string       `json:"hint"`
	HomeDir   string        `json:"home_dir"`
	Workspace *string       `json:"workspace"`
	Version   string        `json:"version"`
	Detail    SandboxDetail `json:"detail"`
}

// SandboxDetail describes the sandbox's system and runtimes.
type SandboxDetail struct {
	System  SystemEnv      `json:"system"`
	Runtime RuntimeEnv     `json:"runtime"`
	Utils   []ToolCategory `json:"utils"`
}

// SystemEnv is the sandbox's operating system.
type SystemEnv struct {
	OS            string   `json:"os"`
	OSVersion     string   `json:"os_version"`
	Arch          string   `json:"arch"`
	User          string   `json:"user"`
	HomeDir       string   `json:"home_dir"`
	Workspace     *string  `json:"workspace"`
	Timezone      string   `json:"timezone"`
	OccupiedPorts []string `json:"occupied_ports"`
}

// RuntimeEnv lists language runtimes.
type RuntimeEnv struct {
	Python []ToolSpec `json:"python"`
	Nodejs []ToolSpec `json:"nodejs"`
}

// ToolSpec is one runtime binary.
type ToolSpec struct {
	Ver   *string  `json:"ver"`
	Bin   *string  `json:"bin"`
	Alias []string `json:"alias,omitempty"`
}

// ToolCategory groups available tools.
type ToolCategory struct {
	Category string          `json:"category"`
	Tools    []AvailableTool `json:"tools"`
}

// AvailableTool is one command-line tool.
type AvailableTool struct {
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
}

// ShellExecRequest is POST /v1/shell/exec.
type ShellExecRequest struct {
	ID          string   `json:"id,omitempty"`
	ExecDir     string   `json:"exec_dir,omitempty"`
	Command     string   `json:"command"`
	AsyncMode   bool     `json:"async_mode,omitempty"`
	Timeout     *float64 `json:"timeout,omitempty"`
	HardTimeout *float64 `json:"hard_timeout,omitempty"`
}

// ShellCommandResult is the data of POST /v1/shell/exec.
type ShellCommandResult struct {
	SessionID string  `json:"session_id"`
	Command   string  `json:"command"`
	Status    string  `json:"status"`
	Output    *string `json:"output"`
	ExitCode  *int    `json:"exit_code"`
}

// Shell command statuses (BashCommandStatus).
const (
	ShellRunning     = "running"
	ShellCompleted   = "completed"
	ShellHardTimeout = "hard_timeout"
	ShellTerminated  = "terminated"
)

// ShellCreateSessionRequest is POST /v1/shell/sessions/create.
type ShellCreateSessionRequest struct {
	ID      string `json:"id,omitempty"`
	ExecDir string `json:"exec_dir,omitempty"`
}

// ShellCreateSessionResponse is its data.
type ShellCreateSessionResponse struct {
	SessionID  string `json:"session_id"`
	WorkingDir string `json:"working_dir"`
}

// BashExecRequest is POST /v1/bash/exec.
type BashExecRequest struct {
	SessionID       string            `json:"session_id,omitempty"`
	Command         string            `json:"command"`
	ExecDir         string            `json:"exec_dir,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	AsyncMode       bool              `json:"async_mode,omitempty"`
	Timeout         *float64          `json:"timeout,omitempty"`
	HardTimeout     *float64          `json:"hard_timeout,omitempty"`
	MaxOutputLength *int              `json:"max_output_length,omitempty"`
}

// BashExecResult is the data of POST /v1/bash/exec.
type BashExecResult struct {
	SessionID    string  `json:"session_id"`
	CommandID    string  `json:"command_id"`
	Command      string  `json:"command"`
	Status       string  `json:"status"`
	Stdout       *string `json:"stdout"`
	Stderr       *string `json:"stderr"`
	ExitCode     *int    `json:"exit_code"`
	Offset       int64   `json:"offset"`
	StderrOffset int64   `json:"stderr_offset"`
}

// Bash command statuses (CommandStatus).
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusTimedOut  = "timed_out"
	StatusKilled    = "killed"
)

// BashOutputRequest is POST /v1/bash/output.
type BashOutputRequest struct {
	SessionID    string   `json:"session_id"`
	CommandID    string   `json:"command_id,omitempty"`
	Offset       int64    `json:"offset"`
	StderrOffset int64    `json:"stderr_offset"`
	Wait         bool     `json:"wait,omitempty"`
	WaitTimeout  *float64 `json:"wait_timeout,omitempty"`
}

// BashOutputResult is its data.
type BashOutputResult struct {
	SessionID    string           `json:"session_id"`
	Stdout       string           `json:"stdout"`
	Stderr       string           `json:"stderr"`
	Offset       int64            `json:"offset"`
	StderrOffset int64            `json:"stderr_offset"`
	Command      *BashCommandInfo `json:"command"`
}

// BashCommandInfo is a command's status.
type BashCommandInfo struct {
	CommandID string `json:"command_id"`
	Command   string `json:"command"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
}

// BashKillRequest is POST /v1/bash/kill.
type BashKillRequest struct {
	SessionID string `json:"session_id"`
	Signal    string `json:"signal,omitempty"`
}

// BashSessionCreateRequest is POST /v1/bash/sessions/create.
type BashSessionCreateRequest struct {
	SessionID string `json:"session_id,omitempty"`
	ExecDir   string `json:"exec_dir,omitempty"`
}

// BashSessionInfo is its data.
type BashSessionInfo struct {
	SessionID      string    `json:"session_id"`
	Status         string    `json:"status"`
	WorkingDir     string    `json:"working_dir"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	CurrentCommand *string   `json:"current_command"`
	CommandCount   int       `json:"command_count"`
}

// FileReadRequest is POST /v1/file/read.
type FileReadRequest struct {
	File      string `json:"file"`
	StartLine *int   `json:"start_line,omitempty"`
	EndLine   *int   `json:"end_line,omitempty"`
}

// FileReadResult is its data.
type FileReadResult struct {
	Content string `json:"content"`
	File    string `json:"file"`
}

// File content encodings (FileContentEncoding).
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
	EncodingRaw    = "raw"
)

// FileWriteRequest is POST /v1/file/write.
type FileWriteRequest struct {
	File            string `json:"file"`
	Content         string `json:"content"`
	Encoding        string `json:"encoding,omitempty"`
	Append          bool   `json:"append,omitempty"`
	LeadingNewline  bool   `json:"leading_newline,omitempty"`
	TrailingNewline bool   `json:"trailing_newline,omitempty"`
}

// FileWriteResult is its data.
type FileWriteResult struct {
	File         string `json:"file"`
	BytesWritten *int64 `json:"bytes_written"`
}

// FileListRequest is POST /v1/file/list.
type FileListRequest struct {
	Path               string   `json:"path"`
	Recursive          bool     `json:"recursive,omitempty"`
	ShowHidden         *bool    `json:"show_hidden,omitempty"`
	FileTypes          []string `json:"file_types,omitempty"`
	MaxDepth           *int     `json:"max_depth,omitempty"`
	IncludeSize        *bool    `json:"include_size,omitempty"`
	IncludePermissions *bool    `json:"include_permissions,omitempty"`
	SortBy             string   `json:"sort_by,omitempty"`
	SortDesc           bool     `json:"sort_desc,omitempty"`
}

// FileListResult is its data.
type FileListResult struct {
	Path           string     `json:"path"`
	Files          []FileInfo `json:"files"`
	TotalCount     int        `json:"total_count"`
	DirectoryCount int        `json:"directory_count"`
	FileCount      int        `json:"file_count"`
	// Truncated (a sage sandboxd extension) says the listing stopped at
	// the server's entry limit.
	Truncated bool `json:"truncated,omitempty"`
}

// FileInfo is one listed entry.
type FileInfo struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	IsDirectory  bool    `json:"is_directory"`
	Size         *int64  `json:"size"`
	ModifiedTime *string `json:"modified_time"`
	Permissions  *string `json:"permissions"`
	Extension    *string `json:"extension"`
}

// FileUploadResult is the data of POST /v1/file/upload.
type FileUploadResult struct {
	FilePath string `json:"file_path"`
	FileSize int64  `json:"file_size"`
	Success  bool   `json:"success"`
}

// FileFindRequest is POST /v1/file/find.
type FileFindRequest struct {
	Path string `json:"path"`
	Glob string `json:"glob"`
}

// FileFindResult is its data.
type FileFindResult struct {
	Path  string   `json:"path"`
	Files []string `json:"files"`
	// Truncated (a sage sandboxd extension) says the walk stopped at the
	// server's entry limit.
	Truncated bool `json:"truncated,omitempty"`
}

// FileGrepRequest is POST /v1/file/grep.
type FileGrepRequest struct {
	Path            string   `json:"path"`
	Pattern         string   `json:"pattern"`
	Include         []string `json:"include,omitempty"`
	Exclude         []string `json:"exclude,omitempty"`
	CaseInsensitive bool     `json:"case_insensitive,omitempty"`
	FixedStrings    bool     `json:"fixed_strings,omitempty"`
	MaxResults      *int     `json:"max_results,omitempty"`
}

// FileGrepResult is its data.
type FileGrepResult struct {
	Path          string      `json:"path"`
	Pattern       string      `json:"pattern"`
	Matches       []GrepMatch `json:"matches"`
	MatchCount    int         `json:"match_count"`
	FilesSearched *int        `json:"files_searched"`
	FilesMatched  *int        `json:"files_matched"`
	Truncated     bool        `json:"truncated"`
}

// GrepMatch is one matching line.
type GrepMatch struct {
	File        string `json:"file"`
	LineNumber  int    `json:"line_number"`
	LineContent string `json:"line_content"`
}

// FileOperationError is the data of a failed file operation.
type FileOperationError struct {
	Path      string  `json:"path"`
	Operation string  `json:"operation"`
	Message   string  `json:"message"`
	ErrorType string  `json:"error_type"`
	Retryable bool    `json:"retryable"`
	Errno     *int    `json:"errno"`
	ErrnoName *string `json:"errno_name"`
}

// File error types used by sage sandboxd (the spec leaves the vocabulary
// open; the client also understands errno names).
const (
	ErrTypeNotFound     = "not_found"
	ErrTypePermission   = "permission_denied"
	ErrTypeIsDirectory  = "is_directory"
	ErrTypeNotDirectory = "not_directory"
	ErrTypeInvalid      = "invalid_argument"
	ErrTypeIO           = "io_error"
)

// HTTPValidationError is the 422 answer (FastAPI's shape).
type HTTPValidationError struct {
	Detail []ValidationError `json:"detail"`
}

// ValidationError is one problem with a request.
type ValidationError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}
