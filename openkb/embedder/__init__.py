"""The appliance's local OpenAI-compatible embedding service.

OpenKB itself never embeds anything: Milvus' TEXTEMBEDDING function (provider ``openai`` with
``base_url``) calls this service on insert and on search. The supervisor runs it as
``python -m openkb.embedder --host 127.0.0.1 --port P --model use-multilingual-v3`` and waits for
``GET /health``; production deployments point Milvus at TEI/vLLM/a provider instead and do not
run it at all. Only the standard library and numpy are needed (plus the model's own package).
"""
