"""MultiHop-RAG (yixuantt/MultiHop-RAG): news articles as documents, multi-article questions."""

from __future__ import annotations

import hashlib
import logging
import re

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.errors import DatasetError
from ragbench.types import Document, Evidence, Paragraph, Query, Section

log = logging.getLogger(__name__)

CORPUS = "corpus.json"
QUERIES = "MultiHopRAG.json"
# Hugging Face keeps both files at the top; the GitHub repository keeps them under dataset/.
LAYOUTS = ("", "dataset/")
NULL_QUERY = "null_query"
ARTICLE_FIELDS = ("title", "author", "source", "published_at", "category", "url")


def article_id(url: str, title: str) -> str:
    """Stable id of an article: a hash of its URL (title when there is no URL)."""
    return "mh-" + hashlib.sha256((url or title).encode("utf-8")).hexdigest()[:12]


HEADER_FIELDS = (("Title", "title"), ("Source", "source"), ("Published at", "published_at"), ("URL", "url"))


def article_header(art: dict) -> str:
    """The lines the reference adapter writes before each body: Title, Source, Published at, URL (the
    temporal and comparison questions name sources and dates, so they must be searchable)."""
    return "\n".join(f"{label}: {art[key]}" for label, key in HEADER_FIELDS if art.get(key))


BYLINE_FIELDS = (("Source", "source"), ("Published at", "published_at"))


def article_byline(art: dict) -> str:
    """The article's section title: ``Source: ... | Published at: ...``. Every chunk of the article
    carries it in its heading, so a context cut from the body still tells the generator where and when
    the article appeared (the header paragraph reaches it only when it is hit itself)."""
    return " | ".join(f"{label}: {art[key]}" for label, key in BYLINE_FIELDS if art.get(key))


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


class MultiHopRAGAdapter(BaseAdapter):
    """Reads ``corpus.json`` (one document per article: a header paragraph of Title, Source, Published at
    and URL, then the body paragraphs, in one section titled with the source and date, so every context
    heading reads ``<title> > Source: ... | Published at: ...``) and
    ``MultiHopRAG.json`` (question types as published; ``null_query`` is unanswerable).

    Evidence items are matched to articles by URL, then by title; their ``fact`` sentences are text
    evidence. An evidence item naming no article of the corpus is an error (the two files disagree).
    Articles repeating a URL (or, without a URL, a title) are kept once and counted (articles_duplicate).
    """

    doc_id_field = "url (document ids hash it)"
    qid_field = "row index"
    # each evidence fact names its article: relevance per article, retrieval/doc/* (beside MultiHop-RAG's own
    # retrieval/doc_recall_at_k, which reads the top-k chunks' articles)
    evidence_level = "document"
    doc_recall = True  # each evidence fact names its source article: EvidenceRecall@K by document

    def _layout(self, reader: FileReader) -> str:
        for prefix in LAYOUTS:
            if (reader.root / f"{prefix}{CORPUS}").is_file():
                return prefix
        return ""  # let the reader raise its "file not found" with the expected path

    def extra_tags(self) -> dict[str, str]:
        if not self.path and self.variant == "sample":
            return {"sample": "synthetic"}
        return {}

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        prefix = self._layout(reader)
        crel, qrel = f"{prefix}{CORPUS}", f"{prefix}{QUERIES}"
        cfile, qfile = str(reader.root / crel), str(reader.root / qrel)
        stats = {"articles": 0, "articles_duplicate": 0, "articles_empty_body": 0, "queries": 0,
                 "evidence_facts": 0, "evidence_matched_by_title": 0, "answerable_without_evidence": 0}
        by_url: dict[str, str] = {}
        by_title: dict[str, str] = {}
        docs: list[Document] = []
        for n, art in enumerate(reader.read_json(crel, top=list)):
            where = f"#{n}"
            title = require(art, "title", dataset=self.name, file=cfile, where=where, types=(str,))
            body = require(art, "body", dataset=self.name, file=cfile, where=where, types=(str,))
            url = str(art.get("url") or "")
            stats["articles"] += 1
            doc_id = article_id(url, title)
            if (url and url in by_url) or (not url and _norm(title) in by_title):
                stats["articles_duplicate"] += 1
                continue
            paragraphs = tuple(Paragraph(text=p.strip()) for p in re.split(r"\n+", body) if p.strip())
            if not paragraphs:  # keep the article (evidence may name it); its header is its text
                stats["articles_empty_body"] += 1
            paragraphs = (Paragraph(text=article_header(art)), *paragraphs)
            if url:
                by_url[url] = doc_id
            by_title.setdefault(_norm(title), doc_id)
            meta = {k: art.get(k) for k in ARTICLE_FIELDS if art.get(k) is not None}
            docs.append(Document(doc_id=doc_id, title=title,
                                 sections=(Section(title=article_byline(art) or title, paragraphs=paragraphs),),
                                 meta=meta))
        if stats["articles_duplicate"]:
            log.warning("multihop_rag: %d duplicate articles (same URL) kept once", stats["articles_duplicate"])

        queries: list[Query] = []
        for n, row in enumerate(reader.read_json(qrel, top=list)):
            where = f"#{n}"
            text = require(row, "query", dataset=self.name, file=qfile, where=where, types=(str,))
            answer = require(row, "answer", dataset=self.name, file=qfile, where=where, types=(str, int, float))
            qtype = require(row, "question_type", dataset=self.name, file=qfile, where=where, types=(str,))
            items = require(row, "evidence_list", dataset=self.name, file=qfile, where=where, types=(list,))
            stats["queries"] += 1
            evidence: list[Evidence] = []
            doc_ids: list[str] = []
            for ei, item in enumerate(items):
                ewhere = f"{where} evidence_list[{ei}]"
                fact = require(item, "fact", dataset=self.name, file=qfile, where=ewhere, types=(str,))
                url, title = str(item.get("url") or ""), str(item.get("title") or "")
                found: str | None = by_url.get(url) if url else None
                if found is None and _norm(title) in by_title:
                    found = by_title[_norm(title)]
                    stats["evidence_matched_by_title"] += 1
                if found is None:
                    raise DatasetError(
                        f"evidence names an article that is not in {crel} (url {url!r}, title {title!r})",
                        dataset=self.name, file=qfile, record=ewhere, field="url",
                        fix=f"use the {CORPUS} and {QUERIES} of the same MultiHop-RAG release",
                    )
                evidence.append(Evidence(text=fact, doc_id=found))
                if found not in doc_ids:
                    doc_ids.append(found)
            stats["evidence_facts"] += len(evidence)
            answerable = qtype != NULL_QUERY
            if answerable and not evidence:
                stats["answerable_without_evidence"] += 1
            queries.append(Query(
                qid=f"multihop-{n}",
                text=text,
                answers=(str(answer),),
                question_type=qtype,
                answerable=answerable,
                evidence=tuple(evidence),
                doc_ids=tuple(doc_ids),
            ))
        return docs, queries, stats
