"""The context budget: "if I send this now, will it fit and how long will I wait?"
(``budget``), the server's rule past ``max_model_len`` (``ceiling``), one more request on the
live load (``send_now``) and the budget's numeric inputs (``counts``).
"""
