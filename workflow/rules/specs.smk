# Run specs: each job's settings as a JSON file that the job reads, so that a job's shell line
# names a file and not two kilobytes of JSON. A spec is rewritten (and its jobs re-run) when the
# settings it holds change.


localrules:
    run_spec,
    partition_spec,


rule run_spec:
    output:
        f"results/{TIER}/specs/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.json",
    log:
        f"logs/{TIER}/specs/runs/{{workload}}/{{method}}/{{scenario}}/seed{{seed}}.log",
    params:
        run=run_json,
    run:
        write_spec(output[0], params.run, log[0])


rule partition_spec:
    output:
        f"results/{TIER}/specs/partition/{{workload}}/{{method}}.json",
    log:
        f"logs/{TIER}/specs/partition/{{workload}}/{{method}}.log",
    params:
        run=run_json,
    run:
        write_spec(output[0], params.run, log[0])
