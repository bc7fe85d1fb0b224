"""Parameters the gateway cannot honour are a 400 naming the parameter (issue 28, item 3), seen
by the unmodified ``openai`` client and by LangChain (``langchain-openai``): never an ordinary
answer that silently ignored them."""

from __future__ import annotations

import openai
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

ECHO = {"echo": {"chunk_delay_ms": 0}}
ASK = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


async def test_n_above_one_and_client_tools_are_400s_naming_the_parameter(api) -> None:
    world = await api(agent=ECHO)
    async with world.client() as client:
        with pytest.raises(openai.BadRequestError) as two:
            await client.chat.completions.create(model="chatgate", messages=ASK, n=2)
        with pytest.raises(openai.BadRequestError) as tools:
            await client.chat.completions.create(model="chatgate", messages=ASK, tools=[WEATHER])
        with pytest.raises(openai.BadRequestError) as schema:
            await client.chat.completions.create(
                model="chatgate", messages=ASK, response_format={"type": "json_object"}
            )
        with pytest.raises(openai.BadRequestError) as responses_tools:
            await client.responses.create(
                model="chatgate",
                input="hi",
                tools=[{"type": "function", "name": "weather", "parameters": {}}],
            )
        one = await client.chat.completions.create(model="chatgate", messages=ASK, n=1, temperature=0.2)
    assert two.value.param == "n" and two.value.code == "unsupported_parameter"
    assert tools.value.param == "tools" and "tools" in tools.value.message
    assert schema.value.param == "response_format"
    assert responses_tools.value.param == "tools"
    assert one.choices[0].message.content == "echo: hi" and one.choices[0].finish_reason == "stop"


async def test_langchain_answers_plainly_and_bind_tools_is_a_clear_400(api) -> None:
    world = await api(agent=ECHO)
    chat = ChatOpenAI(model="chatgate", base_url=f"{world.base}/v1", api_key=world.token, max_retries=0)
    answer = await chat.ainvoke("hello")
    with pytest.raises(openai.BadRequestError) as refused:
        await chat.bind_tools([weather]).ainvoke("what is the weather in Oslo?")
    assert answer.content == "echo: hello"
    assert refused.value.param == "tools"
