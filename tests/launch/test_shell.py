"""Batch scripts and command lines -> programs, variables, control flow and written files
(planner.launch.shell), on launch scripts written for these tests (tests/data/launch/shell/)."""

from __future__ import annotations

import random

import pytest

from planner.launch.shell import plan_from_launch
from planner.launch.types import Launch
from tests.launch.shell_support import (
    JOBS,
    job_files,
    only,
    run_command,
    run_job,
    run_script,
    timed,
    value,
)

# --- wrappers, variables, positional arguments -------------------------------------------------


def test_wrapper_sees_prefix_assignments_defaults_and_its_arguments() -> None:
    plan = run_job("titan_style")
    call = only(plan)
    assert call.program == "toytrain.main"
    assert call.args == (
        "--job.config", "./configs/toy_7b.toml",
        "--optim.lr", "3e-4", "--run.steps=500", "--note", "two words",
    )  # fmt: skip
    assert call.launcher == "torchrun"
    assert call.launcher_args["nproc_per_node"] == "4"
    assert call.launcher_args["local_ranks_filter"] == "0"
    assert call.where == "launch_train.sh:9"
    assert call.cwd == "/jobs/titan_style"
    assert call.env["NGPU"] == "4"
    assert call.env["RANK_LOG"] == "0"
    assert value(plan.allocation, "launch.world_size") == (4, "launch_train.sh:9")
    assert value(plan.allocation, "hardware.gpus_per_node") == (4, "job.sbatch:5")


def test_empty_argument_list_makes_no_word() -> None:
    plan = run_command('f() { python t.py a "$@"; }; f; f "x y" z')
    assert [c.args for c in plan.invocations] == [("a",), ("a", "x y", "z")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python t.py ${A:-d} ${B:-d} ${C:-d}", ("1", "d", "d")),
        ("python t.py ${A-d} ${B-d} ${C-d}", ("1", "d")),
        ("python t.py ${C:=set} $C", ("set", "set")),
        ("python t.py ${A:+alt} ${C:+alt}x", ("alt", "x")),
        (
            "python t.py ${#LONG} ${LONG#*/} ${LONG##*/} ${LONG%/*} ${LONG%%/*}",
            ("8", "b/c.py", "c.py", "a/b", "a"),
        ),
        (
            "python t.py ${LONG/b/B} ${LONG//\\//.} ${LONG:2:3} ${LONG^^}",
            ("a/B/c.py", "a.b.c.py", "b/c", "A/B/C.PY"),
        ),
        ('N=${N:-"8"}; python t.py $N', ("8",)),
    ],
)
def test_parameter_expansion(text: str, expected: tuple[str, ...]) -> None:
    call = only(run_command("A=1; B=; LONG=a/b/c.py; " + text))
    assert call.args == expected


def test_quoting_and_field_splitting() -> None:
    text = (
        "FLAGS='--a 1  --b'; NAME=\"x y\"; "
        "python t.py $FLAGS \"$NAME\" $NAME 'lit $NAME' $'tab\\there' \"\\$HOME\" a\\ b"
    )
    call = only(run_command(text))
    assert call.args == (
        "--a",
        "1",
        "--b",
        "x y",
        "x",
        "y",
        "lit $NAME",
        "tab\there",
        "$HOME",
        "a b",
    )


def test_arrays_positional_parameters_and_shift() -> None:
    text = (
        'ARGS=(--lr "1e-4" --tag "a b"); ARGS+=(--last); set -- one two three; shift; '
        'python t.py "${ARGS[@]}" ${#ARGS[@]} ${ARGS[1]} $# "$1" "$*" ${10:-none} "${@:2}" '
        '"${@:5}" ${ARGS[-1]}'
    )
    call = only(run_command(text))
    assert call.args == (
        "--lr", "1e-4", "--tag", "a b", "--last", "5", "1e-4", "2", "two", "two three", "none",
        "three", "--last",
    )  # fmt: skip


def test_declarations_and_the_environment_a_program_sees() -> None:
    text = (
        'readonly A=1; declare -x B=2; typeset C=3; export D; D=4; export E="x y"; '
        "local_only=5; export GONE=1; unset GONE; set -x; "
        'F=6 python t.py $A $B $C $D "$E" $local_only'
    )
    call = only(run_command(text, KEEP="k"))
    assert call.args == ("1", "2", "3", "4", "x y", "5")
    assert call.env == {"B": "2", "D": "4", "E": "x y", "F": "6", "KEEP": "k"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("NODES * PER_NODE", "32"),
        ("(NODES + 2) * 3 - 7 / 2 % 4", "15"),
        ("$NODES ** 2", "16"),
        ("NODES > PER_NODE ? NODES : PER_NODE", "8"),
        ("-7 / 2", "-3"),
        ("X = 5, X + 1", "6"),
        ("NODES == 4 && PER_NODE != 8", "0"),
        ("0x10 + 010 + 2#101", "29"),
    ],
)
def test_arithmetic(expression: str, expected: str) -> None:
    call = only(run_command(f"NODES=4; PER_NODE=8; python t.py $(({expression}))"))
    assert call.args == (expected,)


def test_arithmetic_on_unknown_values_is_not_a_number() -> None:
    plan = run_command("N=$(nproc); python t.py --n $((N * 2)) --z $((1 / 0))")
    assert only(plan).args == ("--n", "", "--z", "")
    assert any("division by 0" in note for note in plan.allocation.notes)
    assert any("$(nproc) not evaluated" in note for note in plan.allocation.notes)


def test_unknown_values_keep_the_shape_of_the_command() -> None:
    plan = run_script(
        "#SBATCH -N 2\nHEAD=$(scontrol show hostnames | head -n1)\n"
        'srun --jobid $SLURM_JOB_ID bash -c "torchrun --nnodes 2 --nproc_per_node 4 '
        '--rdzv_endpoint $HEAD:29500 train.py --seed 1"'
    )
    call = only(plan)
    assert call.program == "train.py"
    assert call.launcher_args["rdzv_endpoint"] == ":29500"
    assert "HEAD" not in call.env
    assert value(plan.allocation, "launch.world_size") == (8, "job.sbatch:3")


# --- control flow -----------------------------------------------------------------------------


def test_conditions_decided_by_the_script() -> None:
    text = """
MODE=fast
N=3
if [ "$MODE" = slow ]; then python a.py
elif [[ $MODE == f* && $N -ge 2 ]]; then python b.py
else python c.py
fi
[ -z "$UNSET" ] && python d.py
[ -n "$UNSET" ] || python e.py
test -f cfg.yaml && python f.py
test "$N" -lt 2 && python g.py
if (( N % 2 == 1 )); then python h.py; fi
"""
    plan = run_command(text, {"/w/cfg.yaml": "a: 1\n"})
    assert [c.program for c in plan.invocations] == ["b.py", "d.py", "e.py", "f.py", "h.py"]
    assert plan.allocation.notes == []


def test_undecidable_condition_takes_the_then_branch_with_a_note() -> None:
    plan = run_command("if [ -d /scratch ]; then python a.py; else python b.py; fi")
    assert only(plan).program == "a.py"
    assert any("condition not decided" in note for note in plan.allocation.notes)


def test_case_functions_and_loops() -> None:
    text = """
run() {
  local size=$1
  shift
  python train.py --size "$size" "$@"
}
case "$SIZE" in
  small|tiny) run 1b --x ;;
  l*) run 70b --y ;;
  *) run other ;;
esac
i=0
while [ $i -lt 3 ]; do i=$((i + 1)); done
until false; do break; done
for s in 1 2; do run "$s"; done
python final.py $i ${size:-gone}
"""
    plan = run_command(text, SIZE="large")
    assert [(c.program, c.args) for c in plan.invocations] == [
        ("train.py", ("--size", "70b", "--y")),
        ("train.py", ("--size", "1")),
        ("train.py", ("--size", "2")),
        ("final.py", ("3", "gone")),
    ]


def test_argument_parsing_loop_of_a_wrapper() -> None:
    wrapper = """#!/bin/bash
NODES=1
GPUS=8
function usage { echo "usage"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --gpus=*) GPUS=${1#*=}; shift ;;
    -h) usage; exit 0 ;;
    *) EXTRA+=("$1"); shift ;;
  esac
done
let WORLD=NODES*GPUS
torchrun --nnodes $NODES --nproc_per_node $GPUS train.py --world $WORLD "${EXTRA[@]}"
"""
    plan = run_command("./run.sh --nodes 2 --gpus=4 --x 'y z'", {"/w/run.sh": wrapper})
    call = only(plan)
    assert call.args == ("--world", "8", "--x", "y z")
    assert call.where == "run.sh:14"
    assert value(plan.allocation, "launch.world_size") == (8, "run.sh:14")


def test_python_script_without_suffix_is_a_program() -> None:
    plan = run_command(
        "./tools/train --a 1", {"/w/tools/train": "#!/usr/bin/env python3\nimport os\n"}
    )
    call = only(plan)
    assert (call.program, call.args, call.launcher) == ("./tools/train", ("--a", "1"), "python")


def test_for_loop_of_layouts_gives_one_invocation_each_in_order() -> None:
    plan = run_job("sweep")
    assert [c.args for c in plan.invocations] == [
        ("--tp", tp, "--pp", pp, "--steps", "200", "--name", f"run_tp{tp}_pp{pp}")
        for tp, pp in (("1", "4"), ("2", "2"), ("4", "1"))
    ]
    assert {c.program for c in plan.invocations} == {"toy/run.py"}
    assert {c.launcher for c in plan.invocations} == {"srun"}
    assert all(c.where == "job.sbatch:12" for c in plan.invocations)
    assert value(plan.allocation, "launch.world_size") == (8, "job.sbatch:12")
    assert value(plan.allocation, "hardware.num_gpus") == (
        8,
        "derived: nodes x GPUs per node (job.sbatch:3, job.sbatch:5)",
    )


# --- files, directories, sourced env files ----------------------------------------------------


def test_heredoc_and_conditional_in_a_followed_script() -> None:
    plan = run_job("ds_style")
    call = only(plan)
    assert call.launcher == "deepspeed"
    assert call.launcher_args == {"num_gpus": "4", "num_nodes": "2"}
    assert call.program == "../toy_pretrain.py"
    assert call.cwd == "/jobs/ds_style/examples"
    assert call.where == "examples/pretrain.sh:32"
    assert call.args[-3:] == ("--deepspeed_config", "./tmp/ds.json", "--checkpoint-activations")
    assert value(plan.allocation, "launch.world_size") == (8, "examples/pretrain.sh:32")
    written = plan.files.read_text("/jobs/ds_style/examples/tmp/ds.json")
    assert '"train_batch_size": 64,' in written
    assert '{ "stage": 1 }' in written
    assert (
        plan.files.read_text("/jobs/ds_style/examples/tmp/raw.txt") == "keep $GLOBAL as written\n"
    )
    assert plan.files.exists("/jobs/ds_style/examples/pretrain.sh")


def test_echo_printf_tabs_heredoc_sed_and_copies_write_files() -> None:
    text = """cd out
echo '{"a": 1}' > a.json
printf '%s=%s\\n' k v >> a.json
cat <<-EOF > b.txt
\tindented $((2 + 3))
\tEOF
cp tmpl.json c.json
sed -i "s/BATCH/32/" c.json
sed -e "s/BATCH/16/g" tmpl.json > d.json
X=$(cat b.txt)
python t.py "$X"
"""
    plan = run_command(text, {"/w/out/tmpl.json": '{"batch": BATCH}\n'})
    assert plan.files.read_text("/w/out/a.json") == '{"a": 1}\nk=v\n'
    assert plan.files.read_text("/w/out/b.txt") == "indented 5\n"
    assert plan.files.read_text("/w/out/c.json") == '{"batch": 32}\n'
    assert plan.files.read_text("/w/out/d.json") == '{"batch": 16}\n'
    assert only(plan).args == ("indented 5",)


def test_env_file_sourced_relative_to_the_current_directory() -> None:
    plan = run_job("envfile")
    call = only(plan)
    assert call.args == ("--data", "/datasets/toy", "--lr", "1e-4")
    assert call.env["GPUS"] == "2"
    assert "DATA_DIR" not in call.env
    assert value(plan.allocation, "launch.world_size") == (2, "job.sbatch:7")


def test_directory_tracking() -> None:
    text = (
        "cd a; pushd b/c; python one.py; popd; cd ../x; python two.py; cd -; "
        'python three.py $(pwd) "$(dirname "$PWD/f.py")" $(basename /p/q.yaml .yaml)'
    )
    plan = run_command(text)
    assert [c.cwd for c in plan.invocations] == ["/w/a/b/c", "/w/x", "/w/a"]
    assert plan.invocations[2].args == ("/w/a", "/w/a", "q")


def test_script_that_cannot_be_read_is_a_note() -> None:
    plan = run_command("bash ./missing.sh --a; ./tools/gone.sh; python after.py")
    assert only(plan).program == "after.py"
    assert any("missing.sh could not be read" in note for note in plan.allocation.notes)


# --- hostile scripts --------------------------------------------------------------------------


def test_script_calling_itself_stops_at_the_nesting_bound() -> None:
    files = job_files("hostile")
    plan, seconds = timed(
        lambda: plan_from_launch(
            Launch(batch_script="bash self_call.sh", work_dir=f"{JOBS}/hostile"), files
        )
    )
    assert seconds < 5
    assert 0 < len(plan.invocations) <= 64
    assert any("nested deeper" in note or "stopped" in note for note in plan.allocation.notes)


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("for i in {1..100000000}; do python t.py $i; done", "brace expansion"),
        ("echo {1..9}{1..9}{1..9}{1..9}{1..9}{1..9}", "brace expansion"),
        ("i=0; while [ $i -ge 0 ]; do i=$((i+1)); done", "loop stopped"),
        ("while true; do python t.py; done", "endless loop"),
        ("f() { f; f; }; f", "nested deeper"),
        ("X=x; " + "X=$X$X$X$X; " * 20, "was cut"),
        ("for a in $(seq 1 200); do for b in $(seq 1 200); do echo $a$b; done; done", "stopped"),
        ("python t.py " + "a" * (1 << 20), "was cut"),
        ("python t.py " + "a " * (1 << 19), "tokens"),
        ("X=" + "$(" * 2000 + ")" * 2000, "nested too deep"),
    ],
)
def test_hostile_scripts_end_quickly_with_a_note(text: str, note: str) -> None:
    plan, seconds = timed(lambda: run_script(text))
    assert seconds < 5
    assert any(note in line for line in plan.allocation.notes), plan.allocation.notes


def test_hostile_strings_stay_data() -> None:
    text = (
        "X='$(rm -rf /)'; Y=\"; python evil.py\"; eval echo ok; "
        'python t.py "$X" $Y "`id`" "$(python -c \'import os\')"'
    )
    plan = run_command(text)
    assert [c.program for c in plan.invocations] == ["t.py"]
    assert plan.invocations[0].args == ("$(rm -rf /)", ";", "python", "evil.py", "", "")


def test_unparsable_statement_is_skipped_with_a_note() -> None:
    plan = run_command("fi\npython ok.py\ndiff <(echo a) <(echo b) > /dev/null\n")
    assert only(plan).program == "ok.py"
    assert any("not understood" in note for note in plan.allocation.notes)


def test_random_scripts_never_raise() -> None:
    alphabet = "ab$(){}[]\"'`\\\n;&|<>#=-+*/%?:!~,. 0123456789@"
    words = [
        "python", "t.py", "srun", "bash", "-c", "if", "then", "fi", "for", "do", "done", "case",
        "esac", "<<", "EOF", "${X:-", "$((", "))", "f()", "source", "torchrun",
    ]  # fmt: skip
    generator = random.Random(7)
    for _ in range(300):
        pieces = [
            generator.choice(words) if generator.random() < 0.4 else generator.choice(alphabet)
            for _ in range(generator.randint(1, 80))
        ]
        text = " ".join(pieces) if generator.random() < 0.5 else "".join(pieces)
        plan = run_script(text, {"/w/t.sh": text})
        assert len(plan.invocations) <= 64
