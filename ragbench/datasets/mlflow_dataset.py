"""``dataset=mlflow``: the questions of an MLflow GenAI evaluation dataset (``mlflow.genai.datasets``),
the corpus from ``dataset.documents`` (a folder of .txt/.md/.pdf files or a JSONL corpus, read as
``dataset=custom`` reads them).

Each record of the dataset is one question (the mapping both ways, ``export.py --mlflow-dataset`` writing it):

- ``inputs[question_key]`` (default ``question``; an ``inputs`` of one string field is that field) is the
  question;
- ``expectations.expected_response`` (a string or a list of strings) the gold answers; left out, the question
  is scored on retrieval only;
- ``expectations.expected_retrieved_context`` (MLflow's key for retrieval ground truth: a list of
  ``{"content": ..., "doc_uri": ...}``, a ``relevance`` grade optional) the gold evidence: ``content`` a quote
  located in the corpus, ``doc_uri`` the document (its id, file name or stem); ``doc_uri`` alone names a whole
  relevant document (the dataset is then judged per document, as ``dataset=custom``);
- ``tags[type_tag]`` (default ``question_type``) the question type; ``tags.answerable = "false"`` an
  unanswerable question; ``tags["ragbench.qid"]`` the question id (else the record's id);
  ``tags["ragbench.doc_ids"]`` (a JSON list) the documents the question is about.

The whole record's expectations stay in the question's ``meta`` (``mlflow_expectations``: JSON) for the
``judge=mlflow`` scorers. The dataset's id and digest enter the dataset fingerprint (``dataset_sha256``) and
the run's tags (``ragbench.dataset.mlflow_id``, ``ragbench.dataset.mlflow_digest``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.customqa import RawQA, parse_jsonl
from ragbench.datasets.reader import FileReader
from ragbench.errors import DatasetError

EXPECTED_RESPONSE = "expected_response"
EXPECTED_CONTEXT = "expected_retrieved_context"
QID_TAG = "ragbench.qid"
DOC_IDS_TAG = "ragbench.doc_ids"
ANSWERABLE_TAG = "answerable"
META_KEY = "mlflow_expectations"
SHOWN = 12  # datasets named in the unknown-name error
URI_VARIABLE = "MLFLOW_TRACKING_URI"


@contextmanager
def tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's tracking URI set to ``uri`` for the block: a dataset's records and ``merge_records`` go
    through MLflow's process-wide store (``mlflow.genai.datasets`` takes no URI); the previous one after."""
    import mlflow

    variable, before = os.environ.get(URI_VARIABLE), mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)  # which also sets $MLFLOW_TRACKING_URI
    try:
        yield
    finally:  # unset, the variable as it was; a URI set for good would outrank the variable from here on
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # (as MLflow's own temporary switch does)
        if variable is not None:
            os.environ[URI_VARIABLE] = variable
        if mlflow.get_tracking_uri() != before:
            mlflow.set_tracking_uri(before)


def _fix_store(uri: str) -> str:
    return ("point tracking.uri at a store that keeps evaluation datasets (sqlite:///..., postgresql://..., "
            f"or a server of MLflow >= 3.4), not {uri}")


def _order(record: Any) -> tuple[float, int, str]:
    """Records in the exported order (``ragbench.position``), then as created (MLflow returns them
    unordered)."""
    place = str((record.tags or {}).get(POSITION_TAG, ""))
    return (int(place) if place.isdigit() else float("inf"), int(record.created_time or 0),
            str(record.dataset_record_id))


class MlflowDatasetAdapter(CustomAdapter):
    """An MLflow GenAI evaluation dataset (``name``, or ``dataset_id``; the name is the dataset's in the
    record) of the store ``tracking_uri``, its corpus read from ``documents`` (see the module docstring)."""

    doc_id_field = "doc_uri"
    qid_field = "tags.ragbench.qid (or the record id)"

    def __init__(
        self,
        *,
        name: str | None = None,
        dataset_id: str | None = None,
        documents: str | None = None,
        tracking_uri: str = "sqlite:///mlruns/mlflow.db",
        experiment: str | None = None,
        question_key: str = "question",
        type_tag: str = "question_type",
        **kwargs: Any,
    ) -> None:
        path = Path(str(documents)).expanduser() if documents else None
        corpus = path is not None and path.suffix.lower() in (".jsonl", ".json")
        super().__init__(name=str(name or dataset_id or "mlflow"),
                         path=str(path.parent if corpus and path else path) if path else None,
                         corpus_file=path.name if corpus and path else None, **kwargs)
        self.dataset_name = str(name) if name else None
        self.dataset_id = dataset_id or None
        self.documents = str(documents) if documents else None
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.question_key = question_key
        self.type_tag = type_tag
        self._found: tuple[str, str, str] | None = None  # (id, digest, name) of the dataset read
        self._entity_records: list[Any] = []

    def _where(self) -> str:
        return f"MLflow dataset {self.dataset_name or self.dataset_id!r} in {self.tracking_uri}"

    def read_spec(self) -> dict[str, Any]:
        spec = {**super().read_spec(), "question_key": self.question_key, "type_tag": self.type_tag}
        if self._found:
            spec["mlflow_dataset"] = {"id": self._found[0], "digest": self._found[1]}
        return spec

    def extra_tags(self) -> dict[str, str]:
        if not self._found:
            return {}
        return {"mlflow_id": self._found[0], "mlflow_digest": self._found[1], "mlflow_name": self._found[2]}

    def root(self) -> Path:
        if not self.path:
            raise self._no_corpus()
        return super().root()

    def _no_corpus(self, records: Sequence[Any] = ()) -> DatasetError:
        expected = sum(1 for r in records if EXPECTED_CONTEXT in (r.expectations or {}))
        what = (f"{expected} of its {len(records)} records name expected_retrieved_context in a corpus, and "
                "no corpus was given" if expected else "ragbench retrieves from a corpus, and none was given")
        return DatasetError(what, dataset=self.name, file=self._where(), field="dataset.documents",
                            fix="set dataset.documents=DIR (a folder of .txt/.md/.pdf) or dataset.documents="
                            "corpus.jsonl (one {\"id\", \"title\", \"text\"} per line)")

    def _records(self) -> tuple[Any, list[Any]]:
        """The dataset entity and its records; a one-line DatasetError for an unknown name, an ambiguous
        one, or a store that does not keep datasets."""
        if not self.dataset_name and not self.dataset_id:
            raise DatasetError("no dataset named", dataset=self.name, field="dataset.name",
                               fix="run with dataset=mlflow dataset.name=NAME (or dataset.dataset_id=ID)")
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        client = MlflowClient(tracking_uri=self.tracking_uri)
        try:
            with tracking_uri(self.tracking_uri):
                if self.dataset_id:
                    entity = client.get_dataset(self.dataset_id)
                else:
                    quoted = json.dumps(self.dataset_name)
                    found = client.search_datasets(filter_string=f"name = {quoted}", max_results=2)
                    if not found:
                        listing = self._listing(client)
                        raise DatasetError(f"no evaluation dataset named {self.dataset_name!r}; {listing}",
                                           dataset=self.name, file=self._where(), field="dataset.name",
                                           fix="name one of those (python -m ragbench.export RUN_ID "
                                           "--mlflow-dataset NAME writes a ragbench dataset as one)")
                    if len(found) > 1:
                        ids = ", ".join(d.dataset_id for d in found)
                        raise DatasetError(f"{len(found)} evaluation datasets are named "
                                           f"{self.dataset_name!r}: {ids}", dataset=self.name,
                                           file=self._where(), field="dataset.name",
                                           fix="choose one with dataset.dataset_id=ID")
                    entity = found[0]
                records = sorted(entity.records, key=_order)
        except DatasetError:
            raise
        except NotImplementedError as exc:
            raise DatasetError(f"the MLflow store does not support evaluation datasets ({exc})",
                               dataset=self.name, file=self._where(),
                               fix=_fix_store(self.tracking_uri)) from None
        except MlflowException as exc:
            code = getattr(exc, "error_code", "")
            first = str(exc.message).splitlines()[0][:160] if str(exc.message) else type(exc).__name__
            if code == "RESOURCE_DOES_NOT_EXIST" and self.dataset_id:
                raise DatasetError(f"no evaluation dataset with id {self.dataset_id!r}", dataset=self.name,
                                   file=self._where(), field="dataset.dataset_id",
                                   fix="give an id search_datasets lists, or dataset.name=NAME") from None
            raise DatasetError(f"the MLflow store did not serve evaluation datasets ({code}: {first})",
                               dataset=self.name, file=self._where(),
                               fix=_fix_store(self.tracking_uri)) from None
        return entity, records

    def _listing(self, client: Any) -> str:
        """The experiment's datasets (the whole store's when the experiment is unknown), in a few words."""
        exp = client.get_experiment_by_name(self.experiment) if self.experiment else None
        ids = [exp.experiment_id] if exp is not None else None
        found = client.search_datasets(experiment_ids=ids, filter_string="created_time >= 0", max_results=200)
        names = sorted({d.name for d in found})
        where = f"experiment {self.experiment!r}" if exp is not None else "the store"
        if not names:
            return f"{where} has no evaluation dataset"
        more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
        return f"{where} has: {', '.join(names[:SHOWN])}{more}"

    def _load(self) -> Any:
        entity, records = self._records()
        self._entity_records = records
        if not self.path:
            raise self._no_corpus(records)
        self._found = (str(entity.dataset_id), str(entity.digest), str(entity.name))
        return super()._load()

    def _questions(self, reader: FileReader) -> tuple[str, list[RawQA]]:
        where = self._where()
        rows = [self._row(r, n) for n, r in enumerate(self._entity_records, start=1)]
        raw = parse_jsonl(rows, dataset=self.name, file=where)
        metas = [r.expectations or {} for r in self._entity_records]
        out = []
        for qa, meta, record in zip(raw, metas, self._entity_records, strict=True):
            extra = {META_KEY: json.dumps(meta, sort_keys=True, default=str)} if meta else {}
            out.append(RawQA(qid=qa.qid, question=qa.question, answers=qa.answers,
                             question_type=qa.question_type, answerable=qa.answerable, evidence=qa.evidence,
                             docs=qa.docs,
                             where=f"record {record.dataset_record_id}", meta=extra))
        return where, out

    def _row(self, record: Any, n: int) -> dict[str, Any]:
        """A record as a line of ragbench's QA JSONL (``customqa.parse_jsonl`` checks it)."""
        where, field = f"record {record.dataset_record_id}", ""
        inputs = record.inputs or {}
        tags: Mapping[str, Any] = record.tags or {}
        expectations: Mapping[str, Any] = record.expectations or {}
        question = inputs.get(self.question_key) if isinstance(inputs, Mapping) else None
        if question is None and isinstance(inputs, Mapping):
            strings = [v for v in inputs.values() if isinstance(v, str)]
            question = strings[0] if len(inputs) == 1 and strings else None
        if not isinstance(question, str) or not question.strip():
            keys = sorted(inputs) if isinstance(inputs, Mapping) else []
            raise DatasetError(f"inputs has no {self.question_key!r} string (its keys: {keys})",
                               dataset=self.name, file=self._where(), record=where,
                               field=f"inputs.{self.question_key}",
                               fix="set dataset.question_key to the inputs field that holds the question")
        row: dict[str, Any] = {"id": str(tags.get(QID_TAG) or record.dataset_record_id), "question": question}
        if EXPECTED_RESPONSE in expectations and expectations[EXPECTED_RESPONSE] is not None:
            row["answers"] = expectations[EXPECTED_RESPONSE]
        context = expectations.get(EXPECTED_CONTEXT)
        if context is not None:
            field = f"expectations.{EXPECTED_CONTEXT}"
            if not isinstance(context, list):
                raise DatasetError(f"{EXPECTED_CONTEXT} is not a list", dataset=self.name, file=self._where(),
                                   record=where, field=field,
                                   fix='write [{"content": "a quote", "doc_uri": "file.md"}, ...]')
            row["evidence"] = [self._evidence(item, where, field) for item in context]
        if tags.get(self.type_tag):
            row["question_type"] = str(tags[self.type_tag])
        if str(tags.get(ANSWERABLE_TAG, "")).lower() == "false":
            row["answerable"] = False
        if tags.get(DOC_IDS_TAG):
            try:
                row["doc_ids"] = json.loads(str(tags[DOC_IDS_TAG]))
            except json.JSONDecodeError:
                raise DatasetError(f"tag {DOC_IDS_TAG} is not a JSON list", dataset=self.name,
                                   file=self._where(), record=where, field=f"tags.{DOC_IDS_TAG}",
                                   fix='write it as ["file.md", ...]') from None
        return row

    def _evidence(self, item: Any, where: str, field: str) -> Any:
        if isinstance(item, str):
            return item
        if not isinstance(item, Mapping) or not (item.get("content") or item.get("doc_uri")):
            raise DatasetError("an item is neither a string nor an object with 'content' or 'doc_uri'",
                               dataset=self.name, file=self._where(), record=where, field=field,
                               fix='write {"content": "a quote from a document", "doc_uri": "file.md"}')
        out: dict[str, Any] = {}
        if item.get("content"):
            out["text"] = str(item["content"])
        if item.get("doc_uri"):
            out["doc_id"] = str(item["doc_uri"])
        if "relevance" in item:
            out["relevance"] = item["relevance"]
        return out


POSITION_TAG = "ragbench.position"  # the question's place in the exported set (MLflow keeps no order)


def case_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A ragbench job's questions (its ``cases.jsonl`` rows) as MLflow evaluation-dataset records, the inverse
    of the reader above: the question, every gold answer, the gold evidence (a document judged whole as its
    ``doc_uri`` with its grade; a passage as its text, with its document when the question names one), the
    type, the id, whether it is answerable and its documents. Evidence named by a reference (a PDF page, a
    chunk id) is written as the text it matched."""
    out: list[dict[str, Any]] = []
    for n, row in enumerate(rows):
        answers = [str(a) for a in row.get("answers") or ()]
        doc_ids = [str(d) for d in row.get("doc_ids") or ()]
        expectations: dict[str, Any] = {}
        if answers:
            expectations[EXPECTED_RESPONSE] = answers[0] if len(answers) == 1 else answers
        if row.get("doc_qrels"):
            context = [{"doc_uri": d, **({"relevance": g} if g != 1 else {})}
                       for d, g in row["doc_qrels"].items()]
        else:
            units = (row.get("qrels") or {}).get("unit") or {}
            evidence = row.get("evidence") or {}
            texts, how = list(evidence.get("texts") or ()), list(evidence.get("how") or ())
            # the question's documents named alone (its evidence one id match per document, in their order)
            whole = bool(texts) and len(texts) == len(doc_ids) and all(h == "id" for h in how)
            context = []
            for i, text in enumerate(texts):
                grade = int(units.get(f"ev{i}", 1))
                if whole:
                    item = {"doc_uri": doc_ids[i]}
                elif text:
                    item = {"content": text, **({"doc_uri": doc_ids[0]} if len(doc_ids) == 1 else {})}
                else:
                    continue
                context.append({**item, **({"relevance": grade} if grade != 1 else {})})
        if context:
            expectations[EXPECTED_CONTEXT] = context
        tags = {QID_TAG: str(row["qid"]), "question_type": str(row["question_type"]), POSITION_TAG: str(n)}
        if not row.get("answerable", True):
            tags[ANSWERABLE_TAG] = "false"
        if doc_ids:
            tags[DOC_IDS_TAG] = json.dumps(doc_ids, ensure_ascii=False)
        out.append({"inputs": {"question": str(row["question"])}, "expectations": expectations, "tags": tags})
    return out


def write_dataset(name: str, records: Sequence[Mapping[str, Any]], *, uri: str,
                  experiment_id: str) -> tuple[str, str]:
    """A new evaluation dataset ``name`` in the store ``uri``, linked to ``experiment_id``, holding
    ``records``; its (id, digest). A name the store already holds is refused (a ValueError naming it):
    records merged into another set would mix two datasets."""
    from mlflow import MlflowClient
    from mlflow.genai.datasets import create_dataset, get_dataset

    client = MlflowClient(tracking_uri=uri)
    if client.search_datasets(filter_string=f"name = {json.dumps(name)}", max_results=1):
        raise ValueError(f"the store already holds an evaluation dataset named {name!r}")
    with tracking_uri(uri):
        dataset = create_dataset(name=name, experiment_id=experiment_id, tags={"source": "ragbench.export"})
        dataset.merge_records([dict(r) for r in records])
        stored = get_dataset(dataset_id=dataset.dataset_id)
        return str(stored.dataset_id), str(stored.digest)
