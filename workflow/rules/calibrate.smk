# Calibrated sweeps: each calibration's factor, fitted once on its tuning seed (psml calibrate-sweep);
# every training run of the sweep reads it (train.smk). Trial runs stay in <key>.runs/.


rule calibrate:
    input:
        unpack(calibration_data),
        # Written when the workflow is read (specs.smk).
        spec=wild(layout.SPEC_CALIBRATION),
        traces=calibration_traces,
    output:
        wild(layout.CALIBRATION),
    log:
        layout.wildcards(layout.LOG, tier=TIER, job="calibrate/{calibration}"),
    benchmark:
        layout.wildcards(layout.BENCH, tier=TIER, job="calibrate/{calibration}")
    conda:
        "../envs/psml.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        data_dir=parent_dir,
    shell:
        "psml calibrate-sweep --spec {input.spec} --data {params.data_dir} --out {output} > {log} 2>&1"
