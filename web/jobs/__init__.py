"""Job pages and the jobs API: the list, the submit form and its preview, the job page, code
uploads.
"""
