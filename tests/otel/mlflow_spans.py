"""Run by MLflow's own Python (not the suite's): print, as one JSON list, every span MLflow's
tracking server at `MLFLOW_TRACKING_URI` holds for the experiment named by argv[1], read back
through MLflow's Python client, each with its trace and span ids in hex, its parent, its name,
its attributes decoded, and the inputs and outputs MLflow shows for it."""

import base64
import json
import sys

import mlflow


def hexed(value):
    return None if not value else base64.b64decode(value).hex()


def main(experiment_id):
    out = []
    for trace in mlflow.search_traces(locations=[experiment_id], return_type="list"):
        for span in trace.data.spans:
            d = span.to_dict()
            attributes = {}
            for key, value in d["attributes"].items():
                try:
                    attributes[key] = json.loads(value)
                except (TypeError, ValueError):
                    attributes[key] = value
            out.append(
                {
                    "trace": trace.info.trace_id,
                    "trace_id": hexed(d["trace_id"]),
                    "span_id": hexed(d["span_id"]),
                    "parent_id": hexed(d.get("parent_span_id")),
                    "name": d["name"],
                    "span_type": span.span_type,
                    "attributes": attributes,
                    "inputs": span.inputs,
                    "outputs": span.outputs,
                }
            )
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
