"""``python -m prefixsum grade``: the command-line glue of :mod:`prefixsum.grading`."""

import os
import sys

GRADER_ADDRESS_SPACE_MB = 3072
"""The grader's own address space, MiB, plus 256 per worker (its threads' stacks and malloc arenas); it used
under 800 MiB with 2 workers on chapter 01."""
GRADER_OPEN_FILES = 4096


def add_parser(commands):
    """Add the ``grade`` sub-command to ``commands`` (an argparse sub-parsers object)."""
    grade = commands.add_parser(
        "grade",
        help="grade students' notebooks: grades.csv, summary.csv and a feedback page per student",
        description="Grade submitted notebooks against the instructor's: each exercise is run under nbval and "
        "re-checked by the grader itself, on the classroom simulator, each submission in fresh "
        "processes under time and resource limits. Exits 0 when every submission was graded, "
        "whatever the students scored.",
    )
    grade.add_argument(
        "submissions",
        nargs="*",
        metavar="SUBMISSION",
        help="a notebook, or a folder: a folder of files is one student's submission (named after "
        "the folder), a folder of folders one submission per sub-folder (none: with --record, "
        "only record)",
    )
    grade.add_argument(
        "--out", metavar="DIR", help="folder for grades.csv, summary.csv and feedback/ (needed with submissions)"
    )
    grade.add_argument(
        "--instructor",
        nargs="+",
        metavar="PATH",
        help="the instructor's notebooks, with solutions and exercise metadata (default: the workbook's "
        "notebooks/NN_*.ipynb); a submission is matched to one by the metadata that "
        "'python -m prefixsum student' stamps, else by its exercise ids or its file name",
    )
    grade.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="submissions graded at once (default: the number of cores)",
    )
    grade.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time limit of one exercise with its check (default 60); a whole notebook is killed "
        "after its exercises' limits and 90 s to start",
    )
    grade.add_argument(
        "--memory",
        type=int,
        default=4096,
        metavar="MB",
        help="memory of a submission's run: the resident memory of all its processes together, and "
        "the address space of each, MiB (default 4096)",
    )
    grade.add_argument(
        "--chapters",
        nargs="+",
        metavar="NAME",
        help="the chapters every student owes (01_ladder ...): summary.csv then counts a chapter not "
        "handed in against its full maximum",
    )
    grade.add_argument(
        "--max-size",
        type=int,
        default=16,
        metavar="MB",
        help="a submitted file larger than this is not graded (default 16)",
    )
    grade.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox where none can be made (macOS, no user namespaces): "
        "a submission can then reach the grader, its files and its classmates; every row says so",
    )
    grade.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on the workers of a Dask distributed scheduler (tcp://host:8786) instead of "
        "local processes; the workers need this package and dask[distributed]",
    )
    grade.add_argument(
        "--record",
        metavar="FILE",
        help="write the recording of the instructor's solutions that this command checks to FILE "
        "(JSON), for later batches' --recording: without submissions, every exercise of every "
        "chapter (or of --chapters), and nothing is graded; with submissions, the exercises they "
        "need, with those of --recording",
    )
    grade.add_argument(
        "--recording",
        metavar="FILE",
        help="a recording of --record: the chapters it holds with every exercise the submissions need "
        "are not recorded again; it is refused unless made with the same instructor notebooks, "
        "--timeout, --memory, sandbox and package version",
    )
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    return grade


def main(args):
    """Run the ``grade`` sub-command with parsed ``args``; return the exit status."""
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"--workers must be at least 1; got {args.workers}")
    if args.timeout <= 0:
        raise SystemExit(f"--timeout must be positive; got {args.timeout}")
    if not args.submissions and not args.record:
        raise SystemExit("grade: name at least one SUBMISSION (or only record, with --record FILE)")
    if not args.submissions and args.recording:
        raise SystemExit("grade: --recording serves a batch of SUBMISSIONs (--record FILE alone records every chapter)")
    if args.submissions and not args.out:
        raise SystemExit("grade: --out DIR is needed to grade submissions")
    from .. import grading  # here, not at the top: the other commands need no notebook reader

    if args.max_size < 1:
        raise SystemExit(f"--max-size must be at least 1 (MB); got {args.max_size}")
    limits = grading.Limits(memory_mb=args.memory, cpu_s=int(90 + 10 * args.timeout))
    # The grader's own process reads what sandboxes wrote (bounded): its memory and files are bounded
    # too, in depth. No CPU limit: a batch's CPU grows with the class (the judge's has one).
    workers = args.workers or os.cpu_count() or 1
    grading.limit_process(address_space_mb=GRADER_ADDRESS_SPACE_MB + 256 * workers, open_files=GRADER_OPEN_FILES)
    options = grading.Options(timeout=args.timeout, limits=limits, isolated=not args.unsafe_no_sandbox)
    try:
        _check_writable(args.record)
        if not args.submissions:
            _record_only(args, grading, options)
            return 0
        recording = grading.Recording.read(args.recording) if args.recording else None
        rows = grading.grade(
            args.submissions,
            args.out,
            instructor=args.instructor,
            workers=args.workers,
            options=options,
            scheduler=args.scheduler,
            progress=not args.quiet,
            chapters_named=args.chapters,
            max_notebook_mb=args.max_size,
            recording=recording,
            record_to=args.record,
        )
    except grading.SandboxUnavailable as error:
        # The error says what to do: install bubblewrap, open a folder, or --unsafe-no-sandbox.
        print(f"grade: no sandbox can be made here, so nothing was graded: {error}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2
    students = {r.submission for r in rows}
    print(
        f"graded {len(students)} submissions, {len(rows)} rows: {args.out}/grades.csv, summary.csv, feedback/"
        + (f"; the recording: {args.record}" if args.record else "")
    )
    return 0


def _check_writable(record):
    """Refuse ``--record FILE`` in a folder that cannot be written, before minutes of recording, not after."""
    if record:
        folder = os.path.dirname(os.path.abspath(record))
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"--record {record}: cannot write into {folder}")


def _record_only(args, grading, options):
    """``--record FILE`` without submissions: every exercise of the chapters, written to FILE."""
    recording = grading.record(args.instructor, options, args.chapters, args.workers)
    recording.write(args.record)
    exercises = sum(len(chapter["exercises"]) for chapter in recording.chapters.values())
    print(f"recorded {len(recording.chapters)} chapters, {exercises} exercises: {args.record}")
