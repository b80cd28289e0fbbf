# Operating points (psml_core.tuning): a tune job for each (workload, recipe) whose entry the
# record config/operating_points/<tier>.yaml lacks or holds stale, and the points in use
# collected for the report (and to copy into the record).


localrules:
    tune_spec,
    operating_points,


def tune_json(wildcards):
    """A tune job's settings: its target's run at the tuning seed, the tuning, the fingerprint."""
    key = f"{wildcards.workload}/{wildcards.method}"
    target = TUNING.targets[key]
    return json.dumps(
        {
            "key": key,
            "scenario": target.scenario,
            "scenario_free": target.scenario_free,
            "fingerprint": target.fingerprint,
            "tuning": asdict(EXP.tuning),
            "run": target.spec.to_dict(),
        },
        sort_keys=True,
    )


def tune_traces(wildcards):
    """The trace and device files of a tune job's scenario (as a training job's)."""
    target = TUNING.targets[f"{wildcards.workload}/{wildcards.method}"]
    return delay_traces(SimpleNamespace(scenario=target.scenario))


def collect_points(out, tuned, log):
    """The points in use: the record's, and the tune jobs' (each entry with its source)."""
    from psml_core.tuning.record import check_entry, collected

    jobs = {}
    for path in tuned:
        entry = check_entry(json.loads(Path(path).read_text()), path)
        jobs[f"{entry['workload']}/{entry['method']}"] = {**entry, "source": f"tune job {path}"}
    text = yaml.safe_dump(collected(EXP, TUNING, jobs), sort_keys=False, width=100)
    write_spec(out, text, log)


TUNE_WORKLOADS = sorted({t.workload for t in TUNING.targets.values()})
TUNE_METHODS = sorted({t.method for t in TUNING.targets.values()})


rule tune_spec:
    output:
        f"results/{TIER}/specs/tune/{{workload}}/{{method}}.json",
    log:
        f"logs/{TIER}/specs/tune/{{workload}}/{{method}}.log",
    wildcard_constraints:
        workload="|".join(TUNE_WORKLOADS) or "(?!)",
        method="|".join(TUNE_METHODS) or "(?!)",
    params:
        spec=tune_json,
    run:
        write_spec(output[0], params.spec, log[0])


rule tune:
    input:
        unpack(prepared),
        spec=f"results/{TIER}/specs/tune/{{workload}}/{{method}}.json",
        traces=tune_traces,
    output:
        f"results/{TIER}/tune/{{workload}}/{{method}}.json",
    log:
        f"logs/{TIER}/tune/{{workload}}/{{method}}.log",
    benchmark:
        f"logs/{TIER}/bench/tune/{{workload}}/{{method}}.tsv"
    wildcard_constraints:
        workload="|".join(TUNE_WORKLOADS) or "(?!)",
        method="|".join(TUNE_METHODS) or "(?!)",
    conda:
        "../envs/psml.yaml"
    threads: train_threads
    resources:
        **TRAIN_TASKS,
        **TRAIN_GPU,
        mem_mb=4000,
        # Several full runs (the candidates), one after the other.
        runtime=480,
    params:
        data_dir=parent_dir,
    shell:
        "psml tune --spec {input.spec} --data {params.data_dir} --out {output} > {log} 2>&1"


rule operating_points:
    input:
        tuned=[tune_file(key) for key in sorted(TUNING.pending)],
    output:
        f"results/{TIER}/operating_points.yaml",
    log:
        f"logs/{TIER}/specs/operating_points.log",
    params:
        # The record's entries in use: a change of the record re-collects.
        record=json.dumps(TUNING.entries, sort_keys=True),
    run:
        collect_points(output[0], input.tuned, log[0])
