package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/rundir"
	"github.com/mcprl/mcprl/sampling"
)

// A checkpoint directory holds the model in Hugging Face form (config.json,
// model.safetensors, tokenizer files), optimizer.safetensors (AdamW moments
// under their variable paths) and trainer_state.json. It is written under a
// temporary name and renamed into place, so a kill mid-write never leaves a
// checkpoint that looks complete and is not.
const optimizerFile = "optimizer.safetensors"

// StateFile is the name of a checkpoint's trainer_state.json: the State,
// and the optimizer's step count (sampling.Load reads its "generation").
const StateFile = sampling.StateFile

// State is the trainer's position, saved in trainer_state.json: with the
// model and optimizer state it is all a resumed run needs, since sampling
// seeds and the data order derive from it.
type State struct {
	GlobalStep int     `json:"global_step"`
	MaxSteps   int     `json:"max_steps"`
	Epoch      float64 `json:"epoch"`
	// PromptCursor counts prompts drawn so far (the data position of a
	// trainer that samples prompts; 0 for one that does not).
	PromptCursor int `json:"prompt_cursor"`
	// Rounds counts generation rounds so far (each seeds its sampling).
	Rounds     int              `json:"generation_rounds"`
	LogHistory []map[string]any `json:"log_history,omitempty"`
	// Generation is how the policy was sampled in training (sampling.Settings
	// as JSON), for whoever evaluates the checkpoint; empty when the trainer
	// does not sample.
	Generation json.RawMessage `json:"generation,omitempty"`
}

// checkpointState is trainer_state.json.
type checkpointState struct {
	State
	OptimizerStep int64 `json:"optimizer_step"`
}

// SaveCheckpoint writes a checkpoint of m (whose context also holds the
// Optimizer's state), its tokenizer files and st to dir, atomically.
func SaveCheckpoint(dir string, m *model.Model, tokenizerDir string, st *State) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := m.Save(tmp, model.SaveOptions{TokenizerDir: tokenizerDir}); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	opt := map[string]*tensors.Tensor{}
	for v := range m.Ctx.IterVariables() {
		name := v.ScopeAndName()
		if !strings.HasPrefix(name, OptimizerScope+"/") || v.Name() == "step" && v.Scope() == OptimizerScope {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return fmt.Errorf("checkpoint: %s: %w", name, err)
		}
		opt[strings.TrimPrefix(name, OptimizerScope+"/")] = val
	}
	if err := model.SaveTensors(filepath.Join(tmp, optimizerFile), opt); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	steps, _ := (&Optimizer{}).Steps(m.Ctx)
	data, err := json.MarshalIndent(checkpointState{State: *st, OptimizerStep: steps}, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := writeFileSync(filepath.Join(tmp, StateFile), data); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return syncDir(filepath.Dir(dir))
}

var checkpointName = regexp.MustCompile(`^checkpoint-(\d+)$`)

// LatestCheckpoint returns the complete checkpoint of outputDir with the
// highest step, or "" when there is none.
func LatestCheckpoint(outputDir string) (string, error) {
	entries, err := os.ReadDir(outputDir)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find checkpoint: %w", err)
	}
	best, bestStep := "", -1
	for _, e := range entries {
		m := checkpointName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(outputDir, e.Name(), StateFile)); err != nil {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n > bestStep {
			best, bestStep = filepath.Join(outputDir, e.Name()), n
		}
	}
	return best, nil
}

// Restore loads the optimizer state and trainer state of the latest
// checkpoint in outputDir into m (which the caller loaded from that same
// checkpoint). Without a checkpoint it returns a fresh State.
func Restore(outputDir string, m *model.Model) (*State, error) {
	dir, err := LatestCheckpoint(outputDir)
	if err != nil || dir == "" {
		return &State{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	var cs checkpointState
	if err := json.Unmarshal(data, &cs); err != nil {
		return nil, fmt.Errorf("resume: %s: %w", filepath.Join(dir, StateFile), err)
	}
	opt, err := model.LoadTensors(filepath.Join(dir, optimizerFile))
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	ctx := m.Ctx.Checked(false)
	for name, val := range opt {
		scope, base := filepath.Split(name)
		ctx.InAbsPath(OptimizerScope+"/"+strings.TrimSuffix(scope, "/")).VariableWithValue(base, val).SetTrainable(false)
	}
	ctx.InAbsPath(OptimizerScope).VariableWithValue("step", cs.OptimizerStep).SetTrainable(false)
	return &cs.State, nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ClaimOutputDir locks the run folder dir for this run (a second run on it
// fails at once, naming the holder) and checks what an earlier run left
// there. With resume it returns the checkpoint to resume from, and fails if
// there is none. Without it, a folder holding an earlier run's outputs is
// refused unless overwrite, which deletes them.
func ClaimOutputDir(dir string, resume, overwrite bool) (_ *rundir.Lock, checkpoint string, _ error) {
	if dir == "" {
		return nil, "", errors.New("no output dir: set output_dir in the config or pass --output-dir")
	}
	if resume && overwrite {
		return nil, "", errors.New("give --resume or --overwrite_output_dir, not both")
	}
	if resume {
		// Nothing to resume: say so rather than make the folder (with an
		// empty run.lock) and fail after.
		if st, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("--resume: output dir %s does not exist, so there is no run to resume (drop --resume to start one there)", dir)
		} else if err != nil {
			return nil, "", fmt.Errorf("--resume: output dir: %w", err)
		} else if !st.IsDir() {
			return nil, "", fmt.Errorf("--resume: output dir %s is not a directory", dir)
		}
	}
	lock, err := rundir.Acquire(dir)
	if err != nil {
		return nil, "", err
	}
	prev, err := rundir.Previous(dir)
	if err == nil && resume {
		checkpoint, err = LatestCheckpoint(dir)
		if err == nil && checkpoint == "" {
			err = fmt.Errorf("--resume: output dir %s has no complete checkpoint to resume from", dir)
			if len(prev) > 0 {
				err = fmt.Errorf("%w (it holds %s)", err, strings.Join(prev, ", "))
			}
		}
	}
	if err == nil && !resume && len(prev) > 0 {
		if overwrite {
			err = rundir.Clear(dir)
		} else {
			err = fmt.Errorf("output dir %s holds an earlier run (%s): give --resume to continue it, --overwrite_output_dir to delete it and start over, or another --output-dir", dir, strings.Join(prev, ", "))
		}
	}
	if err != nil {
		lock.Release()
		return nil, "", err
	}
	return lock, checkpoint, nil
}
