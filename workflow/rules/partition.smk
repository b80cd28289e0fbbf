# Placement, computed once before training: samples -> workers, keys -> server shards. One job
# per distinct placement key (common.smk's PLACEMENT_OF): the recipes that place alike share it.


rule partition:
    input:
        unpack(placement_data),
        spec=wild(layout.SPEC_PARTITION),
    output:
        assignment=layout.wildcards(layout.PARTITION, tier=TIER, ext="npz"),
        traffic=layout.wildcards(layout.PARTITION, tier=TIER, ext="json"),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="partition/{workload}/{placement}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="partition/{workload}/{placement}")
    conda:
        RULE_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        data_dir=parent_dir,
    shell:
        "psml partition --run {input.spec} --data {params.data_dir} "
        "--out {output.assignment} --traffic {output.traffic} > {log} 2>&1"
