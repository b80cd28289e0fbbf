# Operating points (psml_core.tuning): a tune job for each (workload, recipe) whose entry the
# record config/operating_points/<tier>.yaml lacks or holds stale, and the points in use
# collected for the report (and to copy into the record).


localrules:
    operating_points,


rule tune:
    input:
        unpack(prepared),
        # Written when the workflow is read (specs.smk).
        spec=wild(layout.SPEC_TUNE),
        traces=tune_traces,
    output:
        wild(layout.TUNE),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="tune/{workload}/{method}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="tune/{workload}/{method}")
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
        layout.path(layout.OPERATING_POINTS, tier=TIER),
    log:
        layout.path(layout.LOG, tier=TIER, job="specs/operating_points"),
    params:
        # The record's entries in use (their hash): a change of the record re-collects.
        record=hashlib.sha256(json.dumps(TUNING.entries, sort_keys=True).encode()).hexdigest(),
    run:
        collect_points(output[0], input.tuned, log[0])
