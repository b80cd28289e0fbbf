# Settings files: each job's settings as a JSON file that the job reads, so that a job's shell
# line names a file and not two kilobytes of JSON. Those known when the workflow is read (run,
# placement, tune and calibration specs, the lists of outputs) are written then, each only when
# its text changed: its new time stamp re-runs exactly the jobs whose settings changed. They are
# not jobs because Snakemake starts every `run:` job as a new Snakemake process, 3-4 s each, and
# the small tier has about 600 of them.
#
# A run whose (workload, recipe) waits for a tune job (no point in the record) gets its spec from
# the run_spec job, at the tune job's point, under specs/tuned/.


localrules:
    run_spec,
    effective_config,


write_changed(settings_files())


rule run_spec:
    input:
        # The tune job's choice, for a (workload, method) the record has no point for.
        tuned=lambda wc: tune_file(EXP.tuning_key(wc.workload, wc.method)),
    output:
        layout.wildcards(layout.SPEC_RUN, tier=TIER, kind="tuned", run_id=layout.RUN_ID),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job=f"specs/tuned/{layout.RUN_ID}"),
    params:
        run=run_json,
    run:
        write_run_spec(output[0], params.run, input.tuned, log[0])


rule effective_config:
    input:
        # The operating points in use, with their candidates (the report's appendix).
        points=layout.path(layout.OPERATING_POINTS, tier=TIER),
    output:
        layout.path(layout.CONFIG, tier=TIER),
    log:
        layout.path(layout.LOG, tier=TIER, job="specs/config"),
    params:
        experiment=experiment_json,
    run:
        write_config_json(output[0], params.experiment, input.points, log[0])
