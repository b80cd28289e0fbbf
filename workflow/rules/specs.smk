# Run specs: each job's settings as a JSON file that the job reads, so that a job's shell line
# names a file and not two kilobytes of JSON. A spec is rewritten (and its jobs re-run) when the
# settings it holds change.


localrules:
    run_spec,
    partition_spec,
    effective_config,
    run_lists,


rule run_spec:
    input:
        # The tune job's choice, where the record has no point for the run's (workload, method).
        tuned=tuned_input,
    output:
        f"results/{TIER}/specs/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.json",
    log:
        f"logs/{TIER}/specs/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.log",
    params:
        run=run_json,
    run:
        write_run_spec(output[0], params.run, input.tuned, log[0])


rule partition_spec:
    output:
        f"results/{TIER}/specs/partition/{{workload}}/{{method}}.json",
    log:
        f"logs/{TIER}/specs/partition/{{workload}}/{{method}}.log",
    params:
        run=partition_json,
    run:
        write_spec(output[0], params.run, log[0])


rule effective_config:
    input:
        # The operating points in use, with their candidates (the report's appendix).
        points=f"results/{TIER}/operating_points.yaml",
    output:
        f"results/{TIER}/config.json",
    log:
        f"logs/{TIER}/specs/config.log",
    params:
        experiment=experiment_json,
    run:
        write_config_json(output[0], params.experiment, input.points, log[0])


rule run_lists:
    output:
        summaries=f"results/{TIER}/specs/summaries.txt",
        metrics=f"results/{TIER}/specs/metrics.txt",
        partitions=f"results/{TIER}/specs/partitions.txt",
    log:
        f"logs/{TIER}/specs/run_lists.log",
    params:
        summaries=lambda wildcards: "\n".join(all_summaries(wildcards)),
        metrics=lambda wildcards: "\n".join(all_metrics(wildcards)),
        partitions=lambda wildcards: "\n".join(all_partitions(wildcards)),
    run:
        write_spec(output.summaries, params.summaries, log[0])
        write_spec(output.metrics, params.metrics, log[0])
        write_spec(output.partitions, params.partitions, log[0])
